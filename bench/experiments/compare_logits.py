#!/usr/bin/env python3
"""Two engines' logits for the same token sequence, compared position by position.

    compare_logits.py REFERENCE.f32 OTHER.f32 N_TOKENS

Both files hold [N_TOKENS][vocab] little-endian float32 (llamacpp_logits, `shrike logits`).
Prints "top1 decided kl max_abs": top-1 agreement over all positions; agreement outside near
ties as "agreeing/decided"; mean KL(reference || other) of the next-token distributions; the
largest absolute logit difference. A near tie: the reference's top two logits closer than twice
the largest difference between the engines at that position, so rounding alone may order them
either way.
"""
import array
import math
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b = array.array("f"), array.array("f")
    with open(sys.argv[1], "rb") as f:
        a.frombytes(f.read())
    with open(sys.argv[2], "rb") as f:
        b.frombytes(f.read())
    n = int(sys.argv[3])
    v = len(a) // n if n > 0 else 0
    if n <= 0 or len(a) != n * v or len(b) != len(a):
        sys.exit(f"logit files of {len(a)} and {len(b)} floats do not both hold {n} rows")
    agree, kl, mad, ties, agree_decided = 0, 0.0, 0.0, 0, 0
    for t in range(n):
        p, q = a[t * v:(t + 1) * v], b[t * v:(t + 1) * v]
        same = max(range(v), key=p.__getitem__) == max(range(v), key=q.__getitem__)
        agree += same
        diff = max(abs(x - y) for x, y in zip(p, q))
        top2 = sorted(p)[-2:]
        if top2[1] - top2[0] < 2 * diff:
            ties += 1
        else:
            agree_decided += same
        mp, mq = max(p), max(q)
        lp = math.log(sum(math.exp(x - mp) for x in p)) + mp
        lq = math.log(sum(math.exp(x - mq) for x in q)) + mq
        kl += sum(math.exp(x - lp) * ((x - lp) - (y - lq)) for x, y in zip(p, q))
        mad = max(mad, diff)
    print(f"{agree / n:.4f} {agree_decided}/{n - ties} {kl / n:.2e} {mad:.3g}")


if __name__ == "__main__":
    main()
