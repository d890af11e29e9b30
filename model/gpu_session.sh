#!/usr/bin/env bash
# One GPU lease of training, run through the `device` tool from the repository root
# (docs/TRAINING.md, "Training on a lent GPU"). The corpus travels compressed in .gpu/
# (ignored by git, named in the call's `carry`):
#   .gpu/train.jsonl.xz  .gpu/valid.jsonl  .gpu/test.jsonl  .gpu/tokenizer.json  .gpu/whl/
#
#   bash model/gpu_session.sh start MINUTES [model.train args]  # unpack, launch (setsid), return
#   bash model/gpu_session.sh wait SECONDS   # follow the run, then copy its export to $OUT
#   bash model/gpu_session.sh eval           # held-out eval of the export on the GPU, to $OUT
#
# The run lives in /tmp/run on the machine and survives between calls while the machine is
# held (it goes back 30 s after a call ends). Each `wait` returns the latest export as a
# tar split into 15 MiB parts (the tool's per-file limit): join with `cat export.tar.* | tar x`.
set -u
RUN=/tmp/run
CORPUS=/tmp/corpus
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site

unpack() {
    mkdir -p "$CORPUS" "$OUT"
    [ -s "$CORPUS/train.jsonl" ] || xz -dc .gpu/train.jsonl.xz > "$CORPUS/train.jsonl"
    cp .gpu/valid.jsonl .gpu/test.jsonl "$CORPUS/"
    if ! python3 -c "import tree_sitter_python" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target /tmp/site .gpu/whl/*.whl
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch, transformers; print('torch', torch.__version__,
        'transformers', transformers.__version__)"
    wc -c "$CORPUS"/*.jsonl
}

launch() {  # launch MINUTES EXTRA_ARGS...: the run under setsid, logging to $RUN.log
    local minutes=$1; shift
    mkdir -p "$RUN"
    setsid nohup python3 -m model.train --corpus "$CORPUS" --tokenizer .gpu/tokenizer.json \
        --out "$RUN" --minutes "$minutes" --quiet "$@" >> "$RUN.log" 2>&1 < /dev/null &
    echo $! > "$RUN.pid"
}

alive() { kill -0 "$(cat "$RUN.pid")" 2>/dev/null; }

copy_export() {  # a snapshot that loads (an evaluation may be writing the export)
    [ -d "$RUN/export" ] || { echo "no export yet"; return; }
    for _ in 1 2 3 4 5; do
        rm -rf /tmp/snap && mkdir -p /tmp/snap && cp -r "$RUN/export" /tmp/snap/ &&
            python3 -c "import safetensors.torch as s; s.load_file('/tmp/snap/export/model.safetensors')" &&
            break
        sleep 3
    done
    rm -f "$OUT"/export.tar.*
    tar -C /tmp/snap -cf - export | split -b 15M -d - "$OUT/export.tar."
    cp "$RUN.log" "$OUT/train.log"
    ls -la "$OUT"
}

case "${1:-}" in
start)
    shift
    minutes=$1; shift
    unpack
    # torch.compile first; if the run has not logged step 50 within 4 minutes (a compile
    # failure, or a hang), it starts again without
    launch "$minutes" --compile "$@"
    for _ in $(seq 48); do
        sleep 5
        grep -q "^step 50 " "$RUN.log" 2>/dev/null && break
        alive || break
    done
    if ! grep -q "^step 50 " "$RUN.log"; then
        echo "--- compiled run failed or stalled; restarting without --compile"
        tail -30 "$RUN.log"
        kill -- -"$(cat "$RUN.pid")" 2>/dev/null; sleep 2
        rm -rf "$RUN"; mv "$RUN.log" "$RUN.compile-failed.log"
        launch "$minutes" "$@"
    fi
    tail -5 "$RUN.log"
    ;;
wait)
    end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ] && alive; do sleep 10; done
    grep -E "^(step|done|resumed|base|small)" "$RUN.log" | tail -12
    alive || tail -20 "$RUN.log"
    copy_export
    ;;
eval)
    python3 -m benchmarks.eval_model --model "$RUN/export" --corpus "$CORPUS" \
        --out "$OUT/eval.json" 2>&1 | grep -v "it/s\]$" | tail -60
    cp "$RUN.log" "$OUT/train.log"
    ;;
*)
    echo "usage: $0 start MINUTES [args] | wait SECONDS | eval" >&2; exit 2
    ;;
esac
