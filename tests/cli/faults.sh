#!/usr/bin/env bash
# faults.sh TIEPOINT CASE WORKDIR SOURCE_DIR
# The command line under faults (issue 19). Each CASE checks that no output is left
# half-written (an output is absent, the complete old file or the complete new one; no
# "*.tmp-*" temporary remains) and that the message names the cause:
#   fsize-<cmd>     the output disk full: RLIMIT_FSIZE (ulimit -f) below the output's size
#   kill            SIGKILL at random moments while synth writes: old or new file, never a mix
#   sigint, sigterm a clean stop: exit 130 / 143, no temporaries, message
#   input-cut       an input that ends early while it is read (a FIFO fed half a file)
#   input-swapped   an input whose bytes change mid-read (the start of one file, the end of
#                   another); and an input removed while ba reads it
#   in-dir          a directory given where each command takes an input file (a folder of
#                   no images where it takes images)
#   out-dir, out-dangling-link, out-readonly, out-same-as-input
#   memory          RLIMIT_AS (ulimit -v) too small for the work: exit 3, a message
#   memory-blas     RLIMIT_AS with no room for OpenBLAS's thread buffers: commands that
#                   call no BLAS finish
# <cmd> is ba, synth, extract, match or track.
set -u
tp=$1; case_name=$2; dir=$3; src=$4
sample=$src/data/sample-20-2000.bal
image=$src/tests/data/images/blobs.pgm
rm -rf "$dir"; mkdir -p "$dir"
cd "$dir" || exit 1

fail() {
  echo "FAIL [$case_name]: $*"
  for f in stdout stderr; do [ -s "$dir/$f" ] && { echo "--- $f"; tail -20 "$dir/$f"; }; done
  exit 1
}
no_temporaries() {
  local left
  left=$(find "$dir" -name '*.tmp-*' | head -3)
  [ -z "$left" ] || fail "temporaries left behind: $left"
}
# run EXPECTED_EXIT REGEX -- COMMAND...: exit code and stderr checked.
run() {
  local want=$1 regex=$2; shift 3
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  local got=$?
  [ "$got" = "$want" ] || fail "exit code $got, expected $want: $*"
  [ -z "$regex" ] || grep -Eq -- "$regex" "$dir/stderr" || fail "stderr does not match /$regex/: $*"
}
old_file() { printf 'the old file, which must survive intact\n' >"$1"; }
is_old() { [ "$(cat "$1" 2>/dev/null)" = "the old file, which must survive intact" ]; }
features() {  # features for match: blobs.pgm and a copy
  mkdir -p "$dir/img" "$dir/feat"
  cp "$image" "$dir/img/a.pgm"; cp "$image" "$dir/img/b.pgm"
  "$tp" extract "$dir/img/a.pgm" "$dir/img/b.pgm" -o "$dir/feat" >/dev/null 2>&1 || fail "extract for match"
}
frames() {
  mkdir -p "$dir/frames"
  for i in 0 1 2; do cp "$image" "$dir/frames/f$i.pgm"; done
}
track() {
  "$tp" track "$dir"/frames/f0.pgm "$dir"/frames/f1.pgm "$dir"/frames/f2.pgm --fast-threshold 10 \
    --lk-coarse-level 2 -q "$@"
}
# A process that is not ASan-built (ASan reserves terabytes of address space: no RLIMIT_AS).
asan_build() { nm -D "$tp" 2>/dev/null | grep -q __asan_init || nm "$tp" 2>/dev/null | grep -q __asan_init; }

# Runs a command (or a function) with `ulimit -f BLOCKS` (1 KiB blocks) in a subshell.
# Its stdout and stderr go through FIFOs (RLIMIT_FSIZE limits files, not pipes), so the
# message is kept whatever the limit.
with_fsize() {
  local blocks=$1; shift
  rm -f "$dir/out.fifo" "$dir/err.fifo"; mkfifo "$dir/out.fifo" "$dir/err.fifo"
  cat "$dir/out.fifo" & local out_pid=$!
  cat "$dir/err.fifo" >&2 & local err_pid=$!
  (ulimit -f "$blocks"; "$@" >"$dir/out.fifo" 2>"$dir/err.fifo")
  local rc=$?
  wait "$out_pid" "$err_pid"
  rm -f "$dir/out.fifo" "$dir/err.fifo"
  return "$rc"
}

case $case_name in
  fsize-ba)
    old_file out.bal
    run 2 "out.bal: write failed \(File too large" -- with_fsize 64 "$tp" ba "$sample" --max-iterations 1 -o out.bal
    is_old out.bal || fail "the old out.bal was changed"
    no_temporaries ;;
  fsize-synth)
    old_file out.bal
    run 2 "out.bal: write failed \(File too large" -- with_fsize 16 "$tp" synth --cameras 10 --points 2000 -o out.bal --quiet
    is_old out.bal || fail "the old out.bal was changed"
    no_temporaries ;;
  fsize-extract)
    mkdir -p feat; old_file feat/blobs.pgm.tpfeat
    run 2 "blobs.pgm.tpfeat: write failed \(File too large" -- with_fsize 1 "$tp" extract "$image" -o feat
    is_old feat/blobs.pgm.tpfeat || fail "the old .tpfeat was changed"
    no_temporaries ;;
  fsize-match)
    features
    mkdir -p matches
    run 2 "write failed \(File too large" -- with_fsize 0 "$tp" match feat/a.pgm.tpfeat feat/b.pgm.tpfeat -o matches
    [ -z "$(ls matches)" ] || fail "match left outputs: $(ls matches)"
    no_temporaries ;;
  fsize-track)
    frames; old_file tracks.txt
    run 2 "tracks.txt: write failed \(File too large" -- with_fsize 0 track -o tracks.txt
    is_old tracks.txt || fail "the old tracks.txt was changed"
    no_temporaries ;;

  kill)
    # synth of ~40 MB: SIGKILL at 8 moments over its run. After each, out.bal is the old
    # file or exactly the reference output (a killed process leaves its temporary: that
    # is all SIGKILL allows, and it is never mistaken for the output).
    args=(synth --cameras 50 --points 100000 --observations-per-point 4 --seed 7 --quiet)
    "$tp" "${args[@]}" -o ref.bal >/dev/null 2>&1 || fail "reference synth"
    start=$(date +%s%N); "$tp" "${args[@]}" -o timing.bal >/dev/null 2>&1
    ms=$(( ($(date +%s%N) - start) / 1000000 )); rm -f timing.bal
    seen_old=0; seen_new=0
    for i in 1 2 3 4 5 6 7 8; do
      old_file out.bal
      "$tp" "${args[@]}" -o out.bal >/dev/null 2>&1 &
      pid=$!
      sleep "$(awk -v ms="$ms" -v i="$i" -v r="$RANDOM" 'BEGIN { printf "%.3f", ms * (i - 1 + r / 32768) / 7 / 1000 }')"
      kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      if is_old out.bal; then seen_old=$((seen_old + 1))
      elif cmp -s out.bal ref.bal; then seen_new=$((seen_new + 1))
      else fail "after SIGKILL $i out.bal is neither the old file nor the complete new one"; fi
      rm -f out.bal.tmp-*
    done
    echo "SIGKILL: $seen_old times the old file, $seen_new times the new one (synth takes $ms ms)" ;;

  sigint|sigterm)
    sig=INT; want=130; [ "$case_name" = sigterm ] && { sig=TERM; want=143; }
    # Job control: a background job of a script would otherwise start with SIGINT ignored
    # (POSIX), and tiepoint keeps a signal its caller ignores ignored.
    set -m
    # Each command is timed once undisturbed, then signalled at half that time; a run that
    # still finished first (a machine whose speed varies: under ctest -j the undisturbed run
    # can take three times as long as the next) is checked whole and tried again, the delay
    # halved each time down to a sixteenth, up to 6 times: at least one must be stopped.
    # ms_of CMD...: milliseconds CMD takes; delay_s ATTEMPT: the seconds to wait.
    ms_of() { local t0; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || fail "undisturbed run: $*"; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
    delay_s() { awk -v ms="$ms" -v a="$1" 'BEGIN { d = 2 ^ (a < 4 ? a : 4); printf "%.3f", ms / 1000 / d }'; }
    # synth writing ~80 MB: the signal lands while it computes or writes.
    synth_cmd=("$tp" synth --cameras 100 --points 200000 --observations-per-point 4 --quiet -o out.bal
               --truth truth.bal)
    ms=$(ms_of "${synth_cmd[@]}")
    stopped=0
    for attempt in 1 2 3 4 5 6; do
      old_file out.bal; rm -f truth.bal
      "${synth_cmd[@]}" >"$dir/stdout" 2>"$dir/stderr" &
      pid=$!
      sleep "$(delay_s "$attempt")"
      kill -"$sig" "$pid"
      wait "$pid"; got=$?
      if [ "$got" = 0 ]; then
        "$tp" ba out.bal --max-iterations 0 >/dev/null 2>&1 || fail "synth finished, but out.bal is not whole"
        continue
      fi
      [ "$got" = "$want" ] || fail "exit code $got after SIG$sig, expected $want"
      grep -q "stopped by SIG$sig" "$dir/stderr" || fail "no message naming SIG$sig"
      is_old out.bal || [ ! -e out.bal ] || "$tp" ba out.bal --max-iterations 0 >/dev/null 2>&1 ||
        fail "out.bal is neither old nor complete"
      no_temporaries
      stopped=$((stopped + 1)); break
    done
    [ "$stopped" = 1 ] || fail "synth (${ms} ms) finished before SIG$sig 6 times"
    # ba: stopped in the solve (the solve is ~80% of its time).
    "$tp" synth --cameras 100 --points 60000 --quiet -o big.bal >/dev/null 2>&1 || fail "synth for ba"
    ba_cmd=("$tp" ba big.bal --max-iterations 1000 --solver cholmod -o refined.bal)
    ms=$(ms_of "${ba_cmd[@]}")
    stopped=0
    for attempt in 1 2 3 4 5 6; do
      old_file refined.bal
      "${ba_cmd[@]}" >"$dir/stdout" 2>"$dir/stderr" &
      pid=$!
      sleep "$(delay_s "$attempt")"
      kill -"$sig" "$pid"
      wait "$pid"; got=$?
      [ "$got" = 0 ] && continue
      [ "$got" = "$want" ] || fail "ba: exit code $got after SIG$sig, expected $want"
      is_old refined.bal || fail "ba: the old refined.bal was changed"
      no_temporaries
      stopped=$((stopped + 1)); break
    done
    [ "$stopped" = 1 ] || fail "ba (${ms} ms) finished before SIG$sig 6 times"
    echo "SIG$sig stopped synth and ba" ;;

  input-cut)
    # ba and extract read a FIFO that delivers half a file: a truncation message, exit 2.
    mkfifo in.bal
    head -c 100000 "$sample" >in.bal &
    run 2 "in.bal:.*file ends" -- "$tp" ba in.bal -o out.bal
    [ ! -e out.bal ] || fail "ba wrote out.bal from a cut input"
    wait
    mkfifo in.pgm
    head -c 2000 "$image" >in.pgm &
    run 2 "in.pgm: truncated PGM" -- "$tp" extract in.pgm -o feat
    [ -z "$(ls feat 2>/dev/null)" ] || fail "extract wrote from a cut input"
    wait
    features
    mkfifo cut.tpfeat
    head -c 1000 feat/a.pgm.tpfeat >cut.tpfeat &
    run 2 "cut.tpfeat: truncated feature file" -- "$tp" match cut.tpfeat feat/b.pgm.tpfeat -o m
    wait
    no_temporaries ;;

  input-swapped)
    # The start of one BAL file and the end of another: the counts disagree with the data.
    "$tp" synth --cameras 10 --points 500 --seed 3 --quiet -o other.bal >/dev/null 2>&1 || fail synth
    mkfifo in.bal
    { head -c 50000 "$sample"; tail -c +50001 other.bal; } >in.bal &
    "$tp" ba in.bal -o out.bal >"$dir/stdout" 2>"$dir/stderr"; got=$?
    wait
    [ "$got" = 2 ] || fail "exit code $got for a spliced input, expected 2"
    grep -Eq "in.bal:[0-9]+: expected" "$dir/stderr" || fail "no message naming in.bal and a line"
    [ ! -e out.bal ] || fail "ba wrote out.bal from a spliced input"
    # Removed while read: the open file is still read whole (POSIX), so ba finishes.
    cp "$sample" gone.bal
    "$tp" ba gone.bal --max-iterations 2 -o out.bal >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    rm -f gone.bal
    wait "$pid"; got=$?
    { [ "$got" = 0 ] && [ -s out.bal ]; } || { [ "$got" = 2 ] && [ ! -e out.bal ]; } ||
      fail "input removed while read: exit $got"
    no_temporaries ;;

  in-dir)
    # A directory where an input file belongs: named as such (a directory opens on Linux as
    # a stream that reads as empty: "no pairs", a JSON parse error at its first byte), exit 2,
    # and no output, not even the empty output folder the run would have made.
    mkdir -p d; features; frames
    f1=$dir/feat/a.pgm.tpfeat; f2=$dir/feat/b.pgm.tpfeat
    run 2 "d: is a directory, not a BAL file" -- "$tp" ba d -o out.bal
    run 2 "d: no feature files \(\*.tpfeat\) in the folder" -- "$tp" match d "$f2" -o m1
    run 2 "d: is a directory, not a pairs file" -- "$tp" match "$f1" "$f2" --pairs d -o m2
    run 2 "d: is a directory, not an intrinsics file" -- \
      "$tp" match "$f1" "$f2" --verify essential --intrinsics d -o m3
    # A folder among the images stands for the image files in it; one with none is named.
    run 2 "d: no image files \(\*.png" -- "$tp" extract d -o e1
    run 2 "d: no image files" -- "$tp" extract --detector fast d -o e2
    run 2 "d: no image files" -- "$tp" track d "$dir/frames/f1.pgm" -o t.txt
    run 2 "d: is a directory, not a job file" -- "$tp" batch d -o run1
    rec=("$tp" reconstruct "$dir/frames/f0.pgm" "$dir/frames/f1.pgm" "$dir/frames/f2.pgm")
    run 2 "d: is a directory, not a pairs file" -- "${rec[@]}" --pairs d -o r1/sub/
    run 2 "d: is a directory, not an intrinsics file" -- "${rec[@]}" --intrinsics d -o r2
    run 2 "d: is a directory, not a tracks file" -- "${rec[@]}" --tracks d -o r3
    printf '# only a comment\n' >pairs.txt
    run 2 "pairs.txt: no pairs in the file" -- "${rec[@]}" --pairs pairs.txt -o r4
    # A malformed line fails before any image is read; a name that is none of the images
    # (each answers to its path, file name and stem), once the names are known.
    printf 'f0 f1.pgm  # a comment\nf1 f2 f0\n' >pairs3.txt
    run 2 "pairs3.txt:2: expected two names, found 3" -- "${rec[@]}" --pairs pairs3.txt -o r7
    printf 'f0 %s\nf1.pgm nosuch  # a comment\n' "$dir/frames/f2.pgm" >pairs4.txt
    run 2 "pairs4.txt:2: 'nosuch' is not one of the images given" -- "${rec[@]}" --pairs pairs4.txt -o r8
    run 2 "d: no image files" -- "$tp" reconstruct d "$dir/frames/f0.pgm" -o r5
    # Fewer than two readable images: exit 1, and the folder it made is taken back.
    run 1 "fewer than two usable images" -- "$tp" reconstruct nothing.pgm "$dir/frames/f0.pgm" -o r6
    # Paths through "..", "." and a trailing slash: every folder made is taken back.
    run 1 "fewer than two usable images" -- "$tp" reconstruct nothing.pgm "$dir/frames/f0.pgm" -o x1/../x2/./x3/
    for o in out.bal m1 m2 m3 e1 e2 t.txt run1 r1 r2 r3 r4 r5 r6 r7 r8 x1 x2; do
      [ ! -e "$o" ] || fail "$o was left behind by a run that failed"
    done
    # A folder that existed before stays, empty or not.
    mkdir -p kept
    run 2 "d: is a directory, not a pairs file" -- "${rec[@]}" --pairs d -o kept
    [ -d kept ] || fail "the existing output folder was removed"
    [ -d d ] && [ -z "$(ls d)" ] || fail "the input directory was changed"
    no_temporaries ;;
  out-dir)
    mkdir -p taken.bal
    run 2 "taken.bal: is a directory" -- "$tp" synth --cameras 5 --points 20 --quiet -o taken.bal
    run 2 "taken.bal: is a directory" -- "$tp" ba "$sample" --max-iterations 1 -o taken.bal
    frames; mkdir -p tracks.txt
    run 2 "tracks.txt: is a directory" -- track -o tracks.txt
    [ -d taken.bal ] && [ -z "$(ls taken.bal)" ] || fail "the directory was changed"
    no_temporaries ;;
  out-dangling-link)
    # A dangling link is written through (as `>` would): the target appears, the link stays.
    mkdir -p real
    ln -s real/target.bal link.bal
    run 0 "" -- "$tp" synth --cameras 5 --points 20 --quiet -o link.bal
    [ -L link.bal ] || fail "the link was replaced by a file"
    [ -s real/target.bal ] || fail "the link's target was not written"
    # A link into a directory that does not exist: the path is named, nothing written.
    ln -s missing-dir/target.bal broken.bal
    run 2 "broken.bal" -- "$tp" synth --cameras 5 --points 20 --quiet -o broken.bal
    [ -L broken.bal ] || fail "the broken link was replaced"
    no_temporaries ;;
  out-readonly)
    # As an unprivileged user (root may write anything): a read-only output is refused.
    user=nobody
    chmod 777 "$dir"
    old_file ro.bal; chmod 444 ro.bal
    if [ "$(id -u)" = 0 ]; then
      command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
      as_user=(setpriv --reuid="$(id -u $user)" --regid="$(id -g $user)" --clear-groups)
    else
      as_user=()
    fi
    [ -x "$tp" ] && "${as_user[@]}" test -x "$tp" || { echo "SKIP: $tp not executable by $user"; exit 77; }
    run 2 "ro.bal: exists and cannot be replaced \(Permission denied\)" -- \
      "${as_user[@]}" "$tp" synth --cameras 5 --points 20 --quiet -o ro.bal
    is_old ro.bal || fail "the read-only file was changed"
    no_temporaries ;;
  out-same-as-input)
    # In place: the input is read whole before the output replaces it, atomically.
    "$tp" synth --cameras 5 --points 200 --quiet -o p.bal >/dev/null 2>&1 || fail synth
    cp p.bal before.bal
    run 0 "" -- "$tp" ba p.bal --max-iterations 3 -o p.bal
    cmp -s p.bal before.bal && fail "p.bal was not rewritten"
    run 0 "" -- "$tp" ba p.bal --max-iterations 0
    no_temporaries ;;

  memory)
    asan_build && { echo "SKIP: RLIMIT_AS cannot apply to an ASan build"; exit 77; }
    # 1 GiB of address space: enough to start (libraries, thread stacks), far too little
    # for 10^7 points (about 2 GB of arrays).
    run 3 "out of memory" -- bash -c "ulimit -v 1048576; exec \"$tp\" synth --cameras 2000 --points 10000000 --quiet -o big.bal"
    [ ! -e big.bal ] || fail "synth left big.bal"
    no_temporaries ;;

  memory-blas)
    asan_build && { echo "SKIP: RLIMIT_AS cannot apply to an ASan build"; exit 77; }
    [ "$(nproc)" -gt 1 ] || { echo "SKIP: one core, so OpenBLAS starts no threads"; exit 77; }
    [ -z "${OPENBLAS_NUM_THREADS:-}${OMP_NUM_THREADS:-}" ] || { echo "SKIP: OpenBLAS's thread count is set by the caller"; exit 77; }
    # Commands that never call BLAS, under a limit that leaves no room for OpenBLAS's
    # 128 MiB per thread (they need some 120 MB): each finishes. Before OPENBLAS_NUM_THREADS
    # was set for them, OpenBLAS's thread retried its buffer for ever and `extract` hung at
    # exit (`timeout` makes that exit 124 here).
    "$tp" extract "$image" -o feats --quiet >/dev/null 2>&1 || fail "extract without a limit"
    cp feats/blobs.pgm.tpfeat b.tpfeat
    run 0 "" -- bash -c "ulimit -v 180000; exec timeout 60 \"$tp\" extract \"$image\" -o limited --quiet"
    cmp -s limited/blobs.pgm.tpfeat feats/blobs.pgm.tpfeat || fail "extract under the limit wrote other features"
    run 0 "" -- bash -c "ulimit -v 180000; exec timeout 60 \"$tp\" match feats/blobs.pgm.tpfeat b.tpfeat -o m --quiet"
    run 0 "" -- bash -c "ulimit -v 180000; exec timeout 60 \"$tp\" synth --cameras 5 --points 200 --quiet -o s.bal"
    # ba, which may call BLAS (CHOLMOD), runs it without threads under a limit: with the
    # matrix-free solver, which needs none, it finishes under 200 MB.
    run 0 "" -- bash -c "ulimit -v 200000; exec timeout 60 \"$tp\" ba s.bal --solver pcg-schur --max-iterations 2 --quiet"
    # With CHOLMOD, whose factorization calls BLAS, under a limit too small for OpenBLAS's
    # buffer: "out of memory" (exit 3) where it used to hang inside OpenBLAS; where the
    # limit happens to leave room (another machine's libraries), it finishes.
    bash -c "ulimit -v 300000; exec timeout 60 \"$tp\" ba s.bal --solver cholmod --max-iterations 2 --quiet" \
      >"$dir/stdout" 2>"$dir/stderr"
    rc=$?
    case $rc in
      0) ;;
      3) grep -q "out of memory: .*OpenBLAS's buffer" "$dir/stderr" || fail "exit 3 without the message" ;;
      *) fail "ba --solver cholmod under 300 MB: exit $rc, expected 0 or 3" ;;
    esac
    no_temporaries ;;
  *)
    echo "faults.sh: unknown case $case_name"; exit 2 ;;
esac
exit 0
