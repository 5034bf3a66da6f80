import ts from "typescript";

/**
 * What `ts.getPreEmitDiagnostics(program)` reports in the files `include`
 * picks, checking only those: their imports' types are resolved as the
 * checker needs them, and the bodies of the rest of the program (all of
 * src/, say, for a file importing the package) are not checked only for
 * their diagnostics to be filtered out.
 */
export function diagnosticsIn(program: ts.Program, include: (fileName: string) => boolean): ts.Diagnostic[] {
  return program
    .getSourceFiles()
    .filter((file) => include(file.fileName))
    .flatMap((file) => ts.getPreEmitDiagnostics(program, file).filter((d) => d.file === file));
}
