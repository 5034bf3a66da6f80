export { TOKENS, conformanceFixture as testFixture } from "../../src/testing/conformance/fixture.js";
