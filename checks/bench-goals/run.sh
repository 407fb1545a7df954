#!/usr/bin/env bash
# The goals' table of docs/benchmarks.md ("How to reproduce the goals'
# table"): three rounds of three `studio bench` runs, interleaved, then
# min / median / max of each figure, each ratio taken within its own run.
# Run it on a quiet machine; it notes the load average at each run's start
# and end.
#
#   STUDIO=./studio CENTRIFUGO=~/go/bin/centrifugo \
#   PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres \
#   checks/bench-goals/run.sh [OUT_DIR]
#
# STUDIO      the studio binary (default: studio on PATH)
# CENTRIFUGO  a Centrifugo v6 binary
#             (go install github.com/centrifugal/centrifugo/v6@v6.9.1)
# PG_ADMIN    a PostgreSQL URL allowed to CREATE DATABASE; each PostgreSQL
#             run gets a throwaway database of its own (bench writes to it).
#             Unset: the PostgreSQL rows are skipped.
# ROUNDS      rounds (default 3)
# TAIL10K_ROUNDS  rounds that also run the 10 000-stream tail (default
#             ROUNDS; each takes 3-8 minutes, most of it the 10 000 turns'
#             submission and cancel)
set -euo pipefail
STUDIO=${STUDIO:-studio}
CENTRIFUGO=${CENTRIFUGO:?set CENTRIFUGO to a Centrifugo v6 binary}
ROUNDS=${ROUNDS:-3}
TAIL10K_ROUNDS=${TAIL10K_ROUNDS:-$ROUNDS}
OUT=${1:-bench-goals-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
load() { cut -d' ' -f1 /proc/loadavg; }

run() { # name, bench flags...
  local name=$1; shift
  local l0; l0=$(load)
  "$STUDIO" bench --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.log"
  echo "$name: load $l0 -> $(load)" | tee -a "$OUT/load.txt"
}

for i in $(seq "$ROUNDS"); do
  # The tail: 1 000 conversations x 1 stream, 2 000 frames/s, against
  # Centrifugo offered the same in the same run.
  # --text-flush 0: no token -> screen run (no figure below reads it).
  run "tail-$i" --conversations 1 --idle 10 --replay 1000 --text-flush 0 \
    --latency 1000@2000/1 --warm-up 3s --duration 15s --centrifugo "$CENTRIFUGO"
  # The tail at 10 000 conversations x 1 stream, 2 000 frames/s (a frame
  # every 5 s each), against Centrifugo in the same run. The daemon's
  # window opens once every turn is submitted (10 000 turns, 32 at a time:
  # ~50 s at load 3-4, 90-200 s at load 6-15) or the warm-up is over,
  # whichever is later, and lasts --duration; the log's "every turn
  # submitted" line says when.
  # The daemon at its default heartbeat (15 s; Centrifugo pings every
  # 25 s): the bench's daemon beats every second for its idle run, which
  # at 10 000 mostly quiet streams is ~8 000 socket writes a second beside
  # the 2 000 frames.
  [ "$i" -le "$TAIL10K_ROUNDS" ] && run "tail10k-$i" --conversations 1 --idle 10 --replay 1000 --text-flush 0 \
    --latency 10000@2000/1 --warm-up 60s --duration 15s --centrifugo "$CENTRIFUGO" \
    --serve-flag=--heartbeat=15s
  # SQLite: the fsync loop and the 512 KiB-per-fsync probe; small frames
  # at 100 and 1 000 turns; 8 KiB frames at 100 turns; 3 000 idle streams.
  run "sqlite-$i" --conversations 100,1000 --duration 10s --idle 3000 \
    --replay 1000 --latency 10@10 --warm-up 1s
  # PostgreSQL: 3 000 idle streams and a frame across daemons.
  if [ -n "${PG_ADMIN:-}" ]; then
    db="studio_bench_goals_$$_$i"
    psql -q "$PG_ADMIN" -c "CREATE DATABASE $db"
    url=$(printf '%s' "$PG_ADMIN" | sed -E "s#/[^/?]*(\?|$)#/$db\1#")
    run "postgres-$i" --database "$url" --conversations 1 --duration 5s \
      --idle 3000 --replay 1000 --latency 10@10 --warm-up 1s
    psql -q "$PG_ADMIN" -c "DROP DATABASE $db"
  fi
done

# min / median / max of a jq expression over the rounds' files.
stat() { # label, file prefix, jq expression
  local vals
  vals=$(for f in "$OUT/$2"-*.json; do [ -e "$f" ] && jq -r "$3" "$f"; done | sort -g | paste -sd' ')
  awk -v label="$1" -v v="$vals" 'BEGIN { n = split(v, a, " ");
    if (n == 0 || a[1] == "null") { printf "%-58s (not run)\n", label; exit }
    printf "%-58s %.4g / %.4g / %.4g\n", label, a[1], a[int((n+1)/2)], a[n] }'
}
big='.appends[] | select(.frameBytes == 8192 and .conversations == 100)'
small() { echo ".appends[] | select(.conversations == $1 and (.frameBytes // 0) == 0 and (.pipelined | not))"; }
echo
echo "min / median / max of $ROUNDS (files in $OUT; load averages in $OUT/load.txt)"
stat "daemon p99, 1000@2000/1 (ms)" tail '.latency[0].frameP99Ms'
stat "Centrifugo p99, same run (ms)" tail '.centrifugo[0].p99Ms'
stat "daemon p99 / Centrifugo p99 (goal <= 1.5)" tail '.centrifugo[0].studioP99Ratio'
stat "one write+fsync p99, same run (ms; a frame's floor)" tail '.fsyncP99Ms'
stat "daemon p50, 10000@2000/1 (ms)" tail10k '.latency[0].frameP50Ms'
stat "daemon p99, 10000@2000/1 (ms)" tail10k '.latency[0].frameP99Ms'
stat "daemon p99.9, 10000@2000/1 (ms)" tail10k '.latency[0].frameP999Ms'
stat "daemon delivered / offered, 10000@2000/1" tail10k '.latency[0] | .deliveriesPerSec / .deliveriesPerSecOffered'
stat "Centrifugo p50, same run (ms)" tail10k '.centrifugo[0].p50Ms'
stat "Centrifugo p99, same run (ms)" tail10k '.centrifugo[0].p99Ms'
stat "Centrifugo p99.9, same run (ms)" tail10k '.centrifugo[0].p999Ms'
stat "daemon p99 / Centrifugo p99 at 10 000 (goal <= 2)" tail10k \
  'if .latency[0].framesMeasured > 0 then .centrifugo[0].studioP99Ratio else null end'
stat "fsync loop (/s)" sqlite '.fsyncPerSec'
stat "512 KiB-per-fsync probe (MB/s)" sqlite '.diskWriteBytesPerSec / 1e6'
stat "small frames, 100 turns / fsync loop (goal >= 5)" sqlite "$(small 100) | .ratioToFsync"
stat "small frames, 1000 turns / fsync loop (goal >= 5)" sqlite "$(small 1000) | .ratioToFsync"
stat "8 KiB frames, 100 turns / fsync loop (goal >= 5)" sqlite "$big | .ratioToFsync"
stat "8 KiB frames, 100 turns / 512 KiB probe (goal >= 0.25)" sqlite "$big | .ratioToDiskBandwidth"
stat "idle streams, SQLite, RSS KiB per stream (goal <= 16)" sqlite '.idle.rssKiBPerStream'
stat "idle streams, PostgreSQL, RSS KiB per stream (goal <= 32)" postgres '.idle.rssKiBPerStream'
stat "frames across daemons, PostgreSQL, p99 (ms; goal <= 5)" postgres '.crossDaemon.frameP99Ms'
