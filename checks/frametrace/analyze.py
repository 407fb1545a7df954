#!/usr/bin/env python3
"""Per-stage times of frames traced across processes (internal/frametrace).

Usage: analyze.py TRACE_DIR [POSTGRES_LOG]

TRACE_DIR holds the <pid>.trace files a build with -tags frametrace wrote
with FRAMETRACE_DIR set; each line is "unixnano stage conversation
from to pid". Prints p50, p99 and the mean over the slowest 1 % of each
stage's time, then the slowest 1 % of frames end to end with their
stages. With POSTGRES_LOG (log_min_duration_statement=0,
log_line_prefix='%n [%p] '), each batch's COMMIT duration is matched to
the frames whose sent..committed interval holds it.
"""
import collections, glob, os, re, sys

STAGES = ["created", "sent", "committed", "notified", "published", "flushed", "received"]

RECEIVER = ("notified", "published", "flushed")

def load(d):
    """Each frame's first stamp of each stage; the receiving side's stages
    from the process that flushed the frame to the client (another
    process's listener, the bench's own for one, gets it too)."""
    stamps = collections.defaultdict(list)
    for path in glob.glob(os.path.join(d, "*.trace")):
        for line in open(path):
            t, stage, conv, lo, hi, pid = line.split()
            for seq in range(int(lo), int(hi) + 1):
                stamps[(conv, seq)].append((int(t), stage, pid))
    at = {}
    for k, ss in stamps.items():
        ss.sort()
        flusher = next((p for _, s, p in ss if s == "flushed"), None)
        v = {}
        for t, s, p in ss:
            if s in RECEIVER and p != flusher:
                continue
            v.setdefault(s, t)
        at[k] = v
    return at

def commits(log):
    out = []  # (end ms since epoch, duration ms)
    pat = re.compile(r"^(\d+\.\d+) \[\d+\] LOG:\s+duration: ([\d.]+) ms\s+(?:execute|statement)[^:]*: COMMIT")
    for line in open(log, errors="replace"):
        m = pat.match(line)
        if m:
            out.append((float(m.group(1)) * 1000, float(m.group(2))))
    return out

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

def main():
    at = load(sys.argv[1])
    full = {k: v for k, v in at.items() if all(s in v for s in STAGES)}
    print(f"frames with every stage: {len(full)} of {len(at)}")
    if not full:
        return
    pairs = list(zip(STAGES, STAGES[1:]))
    tot = {k: (v["received"] - v["created"]) / 1e6 for k, v in full.items()}
    slow = sorted(tot, key=tot.get)[-max(1, len(tot) // 100):]
    print(f"{'stage':<24} {'p50':>7} {'p99':>7} {'slow1%':>7}  (ms; slow1%: mean over the stage's own slowest 1 %)  in the slowest 1 % of totals: mean")
    for a, b in pairs + [("created", "received")]:
        ds = [(v[b] - v[a]) / 1e6 for v in full.values()]
        top = sorted(ds)[-max(1, len(ds) // 100):]
        ins = [(full[k][b] - full[k][a]) / 1e6 for k in slow]
        print(f"{a + ' -> ' + b:<24} {pct(ds, .5):7.3f} {pct(ds, .99):7.3f} {sum(top) / len(top):7.3f}  {sum(ins) / len(ins):7.3f}")
    cs = commits(sys.argv[2]) if len(sys.argv) > 2 else []
    def commit_of(v):
        # the longest COMMIT that ended within the batch's round trip
        lo, hi = v["sent"] / 1e6 - 1, v["committed"] / 1e6 + 1
        durs = [dur for end, dur in cs if lo <= end <= hi]
        return max(durs) if durs else None
    if cs:
        durs = [d for d in (commit_of(v) for v in full.values()) if d is not None]
        print(f"PostgreSQL COMMIT (matched {len(durs)}): p50 {pct(durs, .5):.3f} p99 {pct(durs, .99):.3f} ms")
    print("slowest 1 % end to end (ms per stage):")
    print("  total  " + "  ".join(f"{b[:9]:>9}" for _, b in pairs) + ("  COMMIT" if cs else ""))
    for k in sorted(slow, key=tot.get):
        v = full[k]
        row = "  ".join(f"{(v[b] - v[a]) / 1e6:9.3f}" for a, b in pairs)
        c = commit_of(v) if cs else None
        print(f"{tot[k]:7.2f}  {row}" + (f"  {c:.3f}" if c is not None else ""))

main()
