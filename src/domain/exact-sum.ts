/**
 * An exact sum of doubles, for the reference evaluation of aggregates: the
 * result differs from the exact sum only by its own rounding (a naive
 * running sum of 100,000 values may be off by far more). While every value
 * is an integer and the sum stays below 2^53 it is a plain number (exact);
 * otherwise the sum is kept as an integer times a power of two (every double
 * is one), which no rounding touches until the result is read.
 */
export interface ExactSum {
  add(value: number): void;
  /** The sum rounded to a double; ±Infinity beyond the double range. */
  total(): number;
  /** The sum divided by `count` (> 0), rounded to a double. */
  mean(count: number): number;
}

export function exactSum(): ExactSum {
  let small = 0;
  /** The sum is `big * 2^exponent` once `big` is not null. */
  let big: bigint | null = null;
  let exponent = 0;

  const addExact = (value: number) => {
    const { mantissa, power } = decompose(value);
    if (big === null) {
      big = BigInt(small);
      exponent = 0;
    }
    if (power < exponent) {
      big <<= BigInt(exponent - power);
      exponent = power;
    }
    big += mantissa << BigInt(power - exponent);
  };

  return {
    add(value) {
      if (value === 0) return;
      if (big === null && Number.isInteger(value)) {
        const next = small + value;
        // Below 2^53 every integer is a double: a sum under it is exact (rounding is monotone, 2^53 is exact).
        if (Math.abs(next) < 2 ** 53) {
          small = next;
          return;
        }
      }
      addExact(value);
    },
    total() {
      return big === null ? small : toDouble(big, exponent);
    },
    mean(count) {
      if (big === null) return small / count;
      // 64 more bits than the quotient needs to round once, and a sticky bit for the remainder.
      const scaled = big << 64n;
      const quotient = scaled / BigInt(count);
      const sticky = quotient * BigInt(count) === scaled ? 0n : 1n;
      return toDouble(quotient * 2n + (quotient < 0n ? -sticky : sticky), exponent - 65);
    },
  };
}

const BITS = new DataView(new ArrayBuffer(8));

/** A finite non-zero double as `mantissa * 2^power` (mantissa signed, exact). */
function decompose(value: number): { mantissa: bigint; power: number } {
  BITS.setFloat64(0, value);
  const high = BITS.getUint32(0);
  const low = BITS.getUint32(4);
  const biased = (high >>> 20) & 0x7ff;
  let mantissa = (BigInt(high & 0xfffff) << 32n) | BigInt(low);
  if (biased !== 0) mantissa |= 1n << 52n;
  const power = (biased === 0 ? 1 : biased) - 1075;
  return { mantissa: value < 0 ? -mantissa : mantissa, power };
}

/** `value * 2^power` rounded to the nearest double (ties to even). */
function toDouble(value: bigint, power: number): number {
  if (value === 0n) return 0;
  const negative = value < 0n;
  let magnitude = negative ? -value : value;
  const length = magnitude.toString(2).length;
  // Keep 64 bits with the dropped ones folded into the lowest (sticky): Number() then rounds once, correctly.
  if (length > 64) {
    const shift = BigInt(length - 64);
    const dropped = magnitude & ((1n << shift) - 1n);
    magnitude = (magnitude >> shift) | (dropped === 0n ? 0n : 1n);
    power += length - 64;
  }
  const result = scaleByPowerOfTwo(Number(magnitude), power);
  return negative ? -result : result;
}

/** `x * 2^power` in steps that stay within the double range until the last one. */
function scaleByPowerOfTwo(x: number, power: number): number {
  let out = x;
  let left = power;
  while (left > 1000) {
    out *= 2 ** 1000;
    left -= 1000;
  }
  while (left < -1000) {
    out *= 2 ** -1000;
    left += 1000;
  }
  return out * 2 ** left;
}
