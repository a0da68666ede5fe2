#!/usr/bin/env bash
# faults_sfm.sh TIEPOINT CASE WORKDIR SOURCE_DIR
# `tiepoint reconstruct` and `tiepoint batch` under faults (issue 19), in the manner of
# tests/cli/faults.sh: each CASE checks that no output is left half-written and that the
# message names the cause. The photos are a small scene tiepoint renders itself (4 or 5
# views of 400 x 300, about 1.5 s to reconstruct on 2 cores).
#   rec-fsize            the output disk full (ulimit -f) while the model is written
#   rec-kill             SIGKILL at random moments: OUT holds the old model, the new one, or
#                        none; never a mix, never a half-written file
#   rec-sigint, rec-sigterm  exit 130 / 143, a message, the old model intact, no temporary
#   rec-input-cut        an image that ends early (a FIFO fed half a PNG): named, skipped
#   rec-input-swapped    an image whose bytes change mid-read (two PNGs spliced): named, skipped
#   rec-input-removed    an image removed, or replaced by another, while the images are read
#   rec-out-file, rec-out-dangling-link, rec-out-readonly   (-o a file, the input itself, a
#                        link to nothing, a directory this user may not write)
#   rec-memory           RLIMIT_AS too small for the photos: exit 3, "out of memory"
#   batch-fsize          the run directory's disk full: failed jobs recorded whole, resumable
#   batch-kill           SIGKILL at random moments: every job record complete, resume finishes
#   batch-sigint, batch-sigterm  exit 130 / 143, what is left said, no partial outputs
#   batch-input-removed  a job's input removed while an earlier job runs; an input replaced
#   batch-out-file, batch-out-dangling-link, batch-out-readonly
#   batch-memory         a job that runs out of memory: recorded as failed with its message
set -u
tp=$1; case_name=$2; dir=$3; src=$4
sample=$src/data/sample-20-2000.bal
rm -rf "$dir"; mkdir -p "$dir"
cd "$dir" || exit 1

fail() {
  echo "FAIL [$case_name]: $*"
  for f in stdout stderr; do [ -s "$dir/$f" ] && { echo "--- $f"; tail -20 "$dir/$f"; }; done
  exit 1
}
# run EXPECTED_EXIT REGEX -- COMMAND...: exit code and stderr checked.
# stdout_has REGEX: the last run's stdout (batch's summary line is there).
stdout_has() { grep -Eq -- "$1" "$dir/stdout" || fail "stdout does not match /$1/"; }
run() {
  local want=$1 regex=$2; shift 3
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  local got=$?
  [ "$got" = "$want" ] || fail "exit code $got, expected $want: $*"
  [ -z "$regex" ] || grep -Eq -- "$regex" "$dir/stderr" || fail "stderr does not match /$regex/: $*"
}
# ulimit -f BLOCKS for a command, its output through FIFOs (as in faults.sh).
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
asan_build() { nm -D "$tp" 2>/dev/null | grep -q __asan_init || nm "$tp" 2>/dev/null | grep -q __asan_init; }
ms_now() { date +%s%N | cut -c1-13; }
# A moment in [from, to) of a run of MS milliseconds, as seconds for sleep.
# watchdog PID: SIGKILL to PID after 60 s (a test that would hang fails instead); its sleep
# writes nowhere, so ctest does not wait for it. end_watchdog stops it.
watchdog() { ( sleep 60 & echo $! >"$dir/watchdog.sleep"; wait $! && kill -KILL "$1" ) >/dev/null 2>&1 & }
end_watchdog() { kill "$(cat "$dir/watchdog.sleep")" 2>/dev/null || true; }
# wait_for SECONDS CONDITION: polls CONDITION (a shell expression) every 50 ms.
wait_for() {
  local end=$(( $(date +%s) + $1 ))
  until eval "$2"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.05
  done
}
moment() { awk -v ms="$1" -v a="$2" -v b="$3" -v r="$RANDOM" 'BEGIN { printf "%.3f", ms * (a + (b - a) * r / 32768) / 1000 }'; }

# --- reconstruct ----------------------------------------------------------------------------
# scene NAME VIEWS ARC: rendered photos in NAME/ (4 views over 60 degrees, 5 over 80).
scene() {
  [ -d "$1" ] || "$tp" render-scene -o "$1" --views "$2" --width 400 --height 300 --arc "$3" -q \
    >/dev/null 2>&1 || fail "render-scene $1"
}
# As an array, not a function: a background job of a function is a subshell, and a signal
# sent to it would not reach tiepoint.
rec=("$tp" reconstruct --single-camera --no-upsample -q)
# The old model: 5 photos; the new one: 4 (tells them apart). Sets ms: how long the old
# one took (the new one takes a little less), for the moments of signals.
old_model() {
  scene old 5 80
  local start; start=$(ms_now)
  "${rec[@]}" old/*.png -o OUT >/dev/null 2>&1 || fail "reconstruct of the old scene"
  ms=$(( $(ms_now) - start ))
  rm -rf OUT.saved; cp -a OUT OUT.saved
}
no_temporaries() {  # the reconstruct temporary directory, AtomicFile temporaries, set-aside dirs
  local left
  left=$(find "$dir" \( -name '.tmp-reconstruct-*' -o -name '*.tmp-*' -o -name '*.old-*' \) | head -3)
  [ -z "$left" ] || fail "temporaries left behind: $left"
}
# model_state OUT: prints "none" (no sparse/), or the registered image count of a model that
# is complete and whose files agree with each other (report.json, the text and binary
# models, model.bal, points.ply, overview.svg); exit 1 for anything else.
model_state() {
  python3 - "$1" <<'PY'
import json, os, struct, sys
out = sys.argv[1]
if not os.path.exists(f"{out}/sparse"):
    print("none"); sys.exit(0)
def die(why): print("broken:", why); sys.exit(1)
try:
    rep = json.load(open(f"{out}/report.json"))
    m = rep["models"][0]
    d = f"{out}/sparse/0"
    def records(name, per):
        lines = [l for l in open(f"{d}/{name}") if not l.startswith("#")]
        if len(lines) % per: die(f"{name}: {len(lines)} lines")
        return len(lines) // per
    n_img, n_pts = records("images.txt", 2), records("points3D.txt", 1)
    n_cam = records("cameras.txt", 1)
    for name, n in (("cameras.bin", n_cam), ("images.bin", n_img), ("points3D.bin", n_pts)):
        if struct.unpack("<Q", open(f"{d}/{name}", "rb").read(8))[0] != n: die(f"{name} count")
    if (n_img, n_pts) != (m["registered_images"], m["points"]):
        die(f"report.json says {m['registered_images']} images, {m['points']} points; "
            f"sparse/0 holds {n_img}, {n_pts}")
    bal = open(f"{d}/model.bal").read().split()
    if (int(bal[0]), int(bal[1])) != (n_img, n_pts): die("model.bal counts")
    ply = open(f"{out}/points.ply", "rb").read()
    head = ply[:ply.index(b"end_header\n") + 11].decode()
    nv = int(head.split("element vertex ")[1].split()[0])
    if nv != n_pts + n_img: die(f"points.ply holds {nv} vertices")
    if not open(f"{out}/overview.svg").read().rstrip().endswith("</svg>"): die("overview.svg cut")
except SystemExit: raise
except Exception as e: die(repr(e))
print(n_img)
PY
}

case $case_name in
  rec-fsize)
    old_model; scene new 4 60
    # 16 KiB: the first text file of the model is larger.
    run 2 "write failed \(File too large" -- with_fsize 16 "${rec[@]}" new/*.png -o OUT
    diff -r OUT OUT.saved >/dev/null || fail "the old model was changed"
    no_temporaries
    # No old model: nothing appears.
    run 2 "write failed \(File too large" -- with_fsize 16 "${rec[@]}" new/*.png -o OUT2
    [ -z "$(ls -A OUT2)" ] || fail "OUT2 holds $(ls -A OUT2)"
    no_temporaries ;;

  rec-kill)
    scene new 4 60; old_model
    seen=""
    for i in 1 2 3 4 5; do
      rm -rf OUT; cp -a OUT.saved OUT
      "${rec[@]}" new/*.png -o OUT >/dev/null 2>&1 &
      pid=$!
      # Spread over the run, the last two near its end (the writing).
      if [ "$i" -le 3 ]; then t=$(moment "$ms" "0.$(( 3 * i - 3 ))" "0.$(( 3 * i ))"); else t=$(moment "$ms" 0.85 1.0); fi
      sleep "$t"
      kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      state=$(model_state OUT) || fail "after SIGKILL at ${t}s: $state"
      case $state in
        5) diff -r -x '.tmp-reconstruct-*' -x '*.old-*' OUT OUT.saved >/dev/null ||
             fail "after SIGKILL at ${t}s: a 5-image model that is not the old one" ;;
        4|none) ;;
        *) fail "after SIGKILL at ${t}s: unexpected model state $state" ;;
      esac
      seen="$seen $state"
    done
    echo "SIGKILL over a ${ms} ms run: model states (5 old, 4 new, none):$seen" ;;

  rec-sigint|rec-sigterm)
    sig=INT; want=130; [ "$case_name" = rec-sigterm ] && { sig=TERM; want=143; }
    set -m  # else a background job starts with SIGINT ignored (POSIX)
    scene new 4 60; old_model
    # Runs 1 and 2 are stopped whatever the machine's speed: their last photo is a FIFO that
    # delivers 100 kB (more than a pipe holds, so the marker file appears only once tiepoint
    # is reading it) and then nothing, so the run is blocked in the image reading when the
    # signal comes. Runs 3 and 4 get the signal near the end of a normal run (the writing).
    mkdir -p fin
    for f in new/*.png; do ln -sf "$dir/$f" "fin/$(basename "$f")"; done
    last=$(ls new/*.png | tail -1); last=$(basename "$last")
    stopped=0
    for i in 1 2 3 4; do
      rm -rf OUT; cp -a OUT.saved OUT
      if [ "$i" -le 2 ]; then
        rm -f fin/"$last" reading; mkfifo fin/"$last"
        { head -c 100000 "new/$last"; touch reading; sleep 60; } >fin/"$last" 2>/dev/null &
        feeder=$!
        # Run 2 writes to a folder it makes (fresh/out): the stop takes it back.
        out=OUT; [ "$i" = 2 ] && out=fresh/out
        "${rec[@]}" fin/*.png -o "$out" >"$dir/stdout" 2>"$dir/stderr" &
        pid=$!
        watchdog "$pid"
        wait_for 30 '[ -e reading ]' || fail "tiepoint never read the FIFO photo"
        t=blocked
        sleep 0.1
      else
        "${rec[@]}" new/*.png -o OUT >"$dir/stdout" 2>"$dir/stderr" &
        pid=$!
        watchdog "$pid"
        t=$(moment "$ms" 0.85 1.0)
        sleep "$t"
      fi
      kill -"$sig" "$pid" 2>/dev/null
      wait "$pid"; got=$?
      end_watchdog
      if [ "$i" -le 2 ]; then
        pkill -P "$feeder" sleep 2>/dev/null; kill "$feeder" 2>/dev/null; wait "$feeder" 2>/dev/null
        [ "$got" = "$want" ] || fail "run $i, blocked reading a photo: exit code $got after SIG$sig, expected $want"
        [ ! -e fresh ] || fail "run $i, stopped by SIG$sig: the output folder it made was left: $(find fresh)"
      fi
      if [ "$got" = 0 ]; then  # finished before the signal: the new model, whole
        [ "$(model_state OUT)" = 4 ] || fail "finished, but the model is not the new one"
      else
        [ "$got" = "$want" ] || fail "exit code $got after SIG$sig at ${t}s, expected $want"
        grep -q "stopped by SIG$sig" "$dir/stderr" || fail "no message naming SIG$sig"
        diff -r OUT OUT.saved >/dev/null || fail "SIG$sig at ${t}s: the old model was changed"
        stopped=$((stopped + 1))
        # A signal while the model is being written must not leave OUT/.tmp-reconstruct-PID
        # (LiveTemporaryDirectory: the signal handling removes it).
        if ls -d OUT/.tmp-reconstruct-* >/dev/null 2>&1; then
          fail "SIG$sig at ${t}s left $(ls -d OUT/.tmp-reconstruct-*)"
        fi
      fi
      no_temporaries
    done
    [ "$stopped" -ge 2 ] || fail "only $stopped runs were stopped by the signal"
    echo "SIG$sig: $stopped of 4 runs stopped (2 while reading a photo), the rest had finished" ;;

  rec-input-cut|rec-input-swapped)
    scene s 5 80
    mkdir -p in; for f in s/*.png; do ln -s "$dir/$f" "in/$(basename "$f")"; done
    rm in/view_004.png; mkfifo in/view_004.png
    size=$(stat -c %s s/view_004.png)
    if [ "$case_name" = rec-input-cut ]; then
      head -c $(( size / 2 )) s/view_004.png >in/view_004.png &
    else
      { head -c $(( size / 2 )) s/view_004.png; tail -c +$(( size / 2 + 1 )) s/view_003.png; } >in/view_004.png &
    fi
    run 0 "skipping .*view_004.png: .*view_004.png" -- "${rec[@]}" in/*.png -o OUT
    wait
    grep -q "view_004.png" OUT/report.json || fail "the skipped image is not in report.json"
    [ "$(model_state OUT)" = 4 ] || fail "the other 4 images do not make the model"
    no_temporaries ;;

  rec-input-removed)
    scene s 5 80
    # Removed (or replaced by another photo) while the images are read: either the open file
    # is read whole, or the image is named and skipped; the run goes on either way.
    for what in remove replace; do
      rm -rf in OUT; cp -r s in
      "${rec[@]}" in/*.png -o OUT >"$dir/stdout" 2>"$dir/stderr" &
      pid=$!
      sleep 0.0$(( RANDOM % 10 ))
      if [ "$what" = remove ]; then rm -f in/view_002.png; else cp in/view_000.png in/tmp.png && mv in/tmp.png in/view_002.png; fi
      wait "$pid"; got=$?
      [ "$got" = 0 ] || fail "$what: exit code $got"
      n=$(model_state OUT) || fail "$what: $n"
      if grep -q "skipping .*view_002.png" "$dir/stderr"; then
        grep -q "view_002.png" OUT/report.json || fail "$what: skipped image not in report.json"
      fi
      echo "$what while read: model of $n images$(grep -q skipping "$dir/stderr" && echo ', view_002 skipped')"
    done
    no_temporaries ;;

  rec-out-file)
    scene s 4 60
    echo "not a directory" >afile
    run 2 "afile: exists and is not a directory" -- "${rec[@]}" s/*.png -o afile
    [ "$(cat afile)" = "not a directory" ] || fail "afile was changed"
    # The output named as one of the inputs.
    cp s/view_000.png keep.png
    run 2 "view_000.png: exists and is not a directory" -- "${rec[@]}" s/*.png -o s/view_000.png
    cmp -s s/view_000.png keep.png || fail "the input was changed"
    no_temporaries ;;
  rec-out-dangling-link)
    scene s 4 60
    ln -s missing/model OUT
    run 2 "OUT: a symbolic link to 'missing/model', which does not exist" -- "${rec[@]}" s/*.png -o OUT
    [ -L OUT ] && [ ! -e missing ] || fail "the link or its target was changed"
    # A link to an existing directory is written through.
    mkdir -p real; ln -s real OUT2
    run 0 "" -- "${rec[@]}" s/*.png -o OUT2
    [ -L OUT2 ] && [ "$(model_state real)" = 4 ] || fail "the model did not go through the link"
    no_temporaries ;;
  rec-out-readonly)
    user=nobody
    chmod 755 "$dir"; mkdir -p ro/sub; chmod 755 ro ro/sub
    if [ "$(id -u)" = 0 ]; then
      command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
      as_user=(setpriv --reuid="$(id -u $user)" --regid="$(id -g $user)" --clear-groups)
    else
      chmod 555 ro/sub ro; as_user=()
    fi
    "${as_user[@]}" test -x "$tp" || { echo "SKIP: $tp not executable by $user"; exit 77; }
    scene s 4 60; chmod -R a+rX s
    run 2 "ro/sub: the output directory is not writable \(Permission denied\)" -- \
      "${as_user[@]}" "$tp" reconstruct s/*.png -o ro/sub -q
    run 2 "ro/new: cannot create the output directory \(Permission denied\)" -- \
      "${as_user[@]}" "$tp" reconstruct s/*.png -o ro/new -q
    [ -z "$(ls -A ro/sub)" ] && [ ! -e ro/new ] || fail "something was written"
    chmod -R u+w ro ;;

  rec-memory)
    asan_build && { echo "SKIP: RLIMIT_AS cannot apply to an ASan build"; exit 77; }
    # Two 8000 x 6000 photos (48 MB each as grey; SIFT's scale space is over 1 GB): in 768 MiB
    # of address space the images load and the features cannot (--max-image-size 0: SIFT on
    # the full images, which the default of 3200 would shrink first).
    python3 - <<'PY' || fail "making the large PNGs"
import struct, zlib
w, h = 8000, 6000
base = bytes((x * 7 + (x >> 5) * 13) & 255 for x in range(w + 256))
for n, shift in (("big1.png", 0), ("big2.png", 40)):
    raw = b"".join(b"\0" + base[(y + shift) % 256:(y + shift) % 256 + w] for y in range(h))
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b"")
    open(n, "wb").write(png)
PY
    run 3 "out of memory" -- bash -c "ulimit -v 786432; exec \"$tp\" reconstruct big1.png big2.png -o OUT --threads 2 --max-image-size 0 -q"
    [ ! -e OUT/sparse ] || fail "a model was written"
    no_temporaries ;;

  # --- batch ----------------------------------------------------------------------------------
  batch-*)
    cp "$sample" a.bal; cp "$sample" b.bal
    # jobs.json: N small ba jobs (about 0.2 s each), each writing a refined problem too.
    jobs() {
      python3 - "$1" "${2:-a.bal}" <<'PY'
import json, sys
n, inp = int(sys.argv[1]), sys.argv[2]
jobs = [{"name": f"j{i}", "kind": "ba", "input": inp if i % 2 == 0 else "b.bal",
         "max-iterations": 2 + i, "threads": 1, "output": "refined.bal"} for i in range(n)]
json.dump({"jobs": jobs}, open("jobs.json", "w"), indent=1)
PY
    }
    # records_ok RUN: every job.json whole (parses, names its job); no temporaries under jobs/.
    records_ok() {
      python3 - "$1" <<'PY' || fail "a job record is not whole"
import json, os, sys
run = sys.argv[1] + "/jobs"
for name in os.listdir(run) if os.path.isdir(run) else []:
    rec = f"{run}/{name}/job.json"
    if name.startswith("."): continue  # a killed run's temporary (resume removes it)
    if os.path.exists(rec):
        r = json.load(open(rec))
        assert r["name"] == name, rec
        if r.get("exit_code") == 0 and name[0] == "j":  # jobs() gives j0.. an output
            assert os.path.getsize(f"{run}/{name}/refined.bal") > 0, name
PY
    }
    tmp_dirs() { find "${1:-RUN}/jobs" -maxdepth 1 -name '.*.tmp-*' 2>/dev/null | head -3; } ;;&

  batch-fsize)
    jobs 3
    # 64 KiB: each job's refined.bal (about 140 KB) cannot be written; the records can.
    run 1 "3 jobs failed" -- with_fsize 64 "$tp" batch jobs.json -o RUN --quiet
    records_ok RUN
    for j in j0 j1 j2; do
      grep -q '"exit_code": 2' RUN/jobs/$j/job.json || fail "$j: not recorded as failed (exit 2)"
      grep -q 'File too large' RUN/jobs/$j/job.json || fail "$j: the record does not name the cause"
      [ ! -e RUN/jobs/$j/refined.bal ] || fail "$j: a refined.bal was left"
    done
    [ -z "$(tmp_dirs)" ] || fail "temporaries left: $(tmp_dirs)"
    # Nothing may be written at all: the batch says so and leaves no record half-written.
    run 1 "3 jobs not recorded as done" -- with_fsize 0 "$tp" batch jobs.json -o RUN0 --quiet
    # (AtomicFile names errno only when the failing write is its final flush: a record larger
    # than the stream buffer failed earlier and says "write failed (disk full, ...)".)
    grep -q "RUN0/jobs/j0/job.json: write failed (.*disk full" "$dir/stderr" || fail "the cause is not named"
    records_ok RUN0
    [ -z "$(tmp_dirs RUN0)" ] || fail "temporaries left: $(tmp_dirs RUN0)"
    # With room again, --retry-failed finishes the first run.
    run 0 "" -- "$tp" batch jobs.json -o RUN --retry-failed --quiet
    records_ok RUN ;;

  batch-kill)
    jobs 4
    start=$(ms_now); "$tp" batch jobs.json -o timing --quiet >/dev/null 2>&1 || fail "reference run"
    ms=$(( $(ms_now) - start )); rm -rf timing
    for i in 1 2 3; do
      "$tp" batch jobs.json -o RUN --quiet >/dev/null 2>&1 &
      pid=$!
      sleep "$(moment "$ms" "0.$(( 3 * i - 3 ))" "0.$(( 3 * i ))")"
      kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      sleep 0.3  # the job processes die with the batch (PR_SET_PDEATHSIG); let them go
      records_ok RUN
    done
    run 0 "" -- "$tp" batch jobs.json -o RUN --quiet
    stdout_has "4 of 4 jobs done"
    records_ok RUN
    [ -z "$(tmp_dirs)" ] || fail "the resumed run left temporaries: $(tmp_dirs)"
    echo "SIGKILL 3 times over a ${ms} ms batch: every record whole; resumed to 4 of 4" ;;

  batch-sigint|batch-sigterm)
    # Deterministic, whatever the machine's speed: the odd jobs read a FIFO, so they block in
    # open() until the signal; the even ones read a.bal and finish.
    sig=INT; want=130; [ "$case_name" = batch-sigterm ] && { sig=TERM; want=143; }
    set -m
    rm b.bal; mkfifo b.bal
    jobs 6
    "$tp" batch jobs.json -o RUN --jobs 2 --quiet >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    watchdog "$pid"
    # Signal once j0 is recorded and j1 is running (blocked on the FIFO).
    wait_for 30 '[ -e RUN/jobs/j0/job.json ] && [ -n "$(find RUN/jobs -maxdepth 1 -name ".j1.tmp-*")" ]' ||
      fail "j0 never finished or j1 never started"
    sleep 0.2
    kill -"$sig" "$pid"
    wait "$pid"; got=$?
    end_watchdog
    [ "$got" = "$want" ] || fail "exit code $got after SIG$sig, expected $want"
    grep -Eq "stopped by SIG$sig: .* left: run the same command again" "$dir/stderr" ||
      fail "no message naming SIG$sig and what is left"
    grep -q '"exit_code": 0' RUN/jobs/j0/job.json || fail "j0's record was lost"
    [ ! -e RUN/jobs/j1/job.json ] || fail "j1 (stopped) has a record"
    records_ok RUN
    [ -z "$(tmp_dirs)" ] || fail "partial outputs left: $(tmp_dirs)"
    rm b.bal; cp "$sample" b.bal
    run 0 "" -- "$tp" batch jobs.json -o RUN --quiet
    stdout_has "6 of 6 jobs done" ;;

  batch-input-removed)
    # "long" reads a FIFO, so it runs until the test writes the problem into it; "short"'s
    # input is removed meanwhile, after the batch has started (and fingerprinted it).
    "$tp" synth --cameras 10 --points 2000 --seed 5 --quiet -o big.bal >/dev/null 2>&1 || fail synth
    mkfifo slow.bal
    cat >jobs.json <<'JSON'
{"jobs": [{"name": "long", "kind": "ba", "input": "slow.bal", "max-iterations": 30, "threads": 1},
          {"name": "short", "kind": "ba", "input": "b.bal", "max-iterations": 2, "threads": 1}]}
JSON
    "$tp" batch jobs.json -o RUN --jobs 1 --quiet >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    watchdog "$pid"
    wait_for 30 '[ -n "$(find RUN/jobs -maxdepth 1 -name ".long.tmp-*" 2>/dev/null)" ]' ||
      fail "the first job never started"
    rm b.bal
    cat big.bal >slow.bal
    wait "$pid"; got=$?
    end_watchdog
    [ "$got" = 1 ] || fail "exit code $got, expected 1 (a failed job)"
    grep -q "b.bal" "$dir/stderr" RUN/jobs/short/job.json 2>/dev/null || fail "the removed input is not named"
    grep -q '"exit_code": 0' RUN/jobs/long/job.json || fail "the first job did not finish"
    records_ok RUN
    # The inputs back as regular files: --retry-failed finishes the run.
    rm slow.bal; cp big.bal slow.bal; cp "$sample" b.bal
    run 0 "" -- "$tp" batch jobs.json -o RUN --retry-failed --quiet
    stdout_has "2 of 2 jobs done"
    # Replaced: a different file under the same name reruns its job, and only that one.
    "$tp" synth --cameras 5 --points 100 --quiet -o slow.bal >/dev/null 2>&1 || fail synth
    run 0 "" -- "$tp" batch jobs.json -o RUN --quiet
    stdout_has "2 of 2 jobs done \(1 this run, 1 already\)"
    records_ok RUN ;;

  batch-out-file)
    jobs 2; echo "not a directory" >afile
    run 2 "afile: exists and is not a directory" -- "$tp" batch jobs.json -o afile --quiet
    run 2 "jobs.json: exists and is not a directory" -- "$tp" batch jobs.json -o jobs.json --quiet
    [ "$(cat afile)" = "not a directory" ] && python3 -c "import json; json.load(open('jobs.json'))" ||
      fail "a file was changed" ;;
  batch-out-dangling-link)
    jobs 2; ln -s missing/run RUN
    run 2 "RUN: a symbolic link to 'missing/run', which does not exist" -- "$tp" batch jobs.json -o RUN --quiet
    [ -L RUN ] && [ ! -e missing ] || fail "the link or its target was changed"
    mkdir -p real; ln -s real RUN2
    run 0 "" -- "$tp" batch jobs.json -o RUN2 --quiet
    [ -s real/jobs/j1/job.json ] || fail "the run did not go through the link" ;;
  batch-out-readonly)
    user=nobody
    chmod 755 "$dir"; mkdir -p ro; chmod 755 ro
    if [ "$(id -u)" = 0 ]; then
      command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
      as_user=(setpriv --reuid="$(id -u $user)" --regid="$(id -g $user)" --clear-groups)
    else
      chmod 555 ro; as_user=()
    fi
    "${as_user[@]}" test -x "$tp" || { echo "SKIP: $tp not executable by $user"; exit 77; }
    jobs 2; chmod a+r jobs.json a.bal b.bal
    run 2 "ro.*Permission denied" -- "${as_user[@]}" "$tp" batch jobs.json -o ro --quiet
    run 2 "ro/new.*Permission denied" -- "${as_user[@]}" "$tp" batch jobs.json -o ro/new --quiet
    [ -z "$(ls -A ro)" ] || fail "something was written: $(ls -A ro)" ;;

  batch-memory)
    asan_build && { echo "SKIP: RLIMIT_AS cannot apply to an ASan build"; exit 77; }
    # A ba job on 10^6 points (about 200 MB of arrays) under 256 MiB of address space.
    "$tp" synth --cameras 100 --points 1000000 --observations-per-point 2 --seed 2 --quiet \
      -o huge.bal >/dev/null 2>&1 || fail synth
    cat >jobs.json <<'JSON'
{"jobs": [{"name": "huge", "kind": "ba", "input": "huge.bal", "max-iterations": 1, "threads": 1},
          {"name": "small", "kind": "ba", "input": "a.bal", "max-iterations": 1, "threads": 1}]}
JSON
    run 1 "1 job failed" -- bash -c "ulimit -v 262144; exec \"$tp\" batch jobs.json -o RUN --quiet"
    grep -q '"exit_code": 3' RUN/jobs/huge/job.json || fail "the job is not recorded with exit code 3"
    grep -q 'out of memory' RUN/jobs/huge/job.json || fail "the record does not say out of memory"
    grep -q '"exit_code": 0' RUN/jobs/small/job.json || fail "the other job did not run"
    records_ok RUN
    [ -z "$(tmp_dirs)" ] || fail "temporaries left: $(tmp_dirs)" ;;

  *)
    echo "faults_sfm.sh: unknown case $case_name"; exit 2 ;;
esac
exit 0
