#!/usr/bin/env bash
# One training run on a GPU machine, called from the root of a copy of the repository
# (docs/TRAINING.md, "Training on a GPU"). The corpus arrives compressed in .gpu/ (ignored
# by git, copied beside the checkout):
#   .gpu/train.jsonl.xz  .gpu/valid.jsonl[.xz]  and, each optional: .gpu/test.jsonl[.xz]
#   .gpu/tokenizer.json  .gpu/whl/ (tree-sitter wheels for `eval`)  .gpu/init/ (the weights
#   to start from, packed to int8 by `python -m diffusion_infill.model.training.packing
#   pack`: pass --init-from /tmp/init)
#
#   bash model/training/train_on_gpu.sh start MINUTES [train args]  # unpack, launch, return
#       (MINUTES 0: no time budget; --max-steps or --tokens in the train args ends the run)
#   bash model/training/train_on_gpu.sh wait SECONDS  # follow the run, copying each new
#       export to $OUT
#   bash model/training/train_on_gpu.sh run MINUTES DEADLINE [args]  # both in one command:
#       start, then copy each new export to $OUT until the run ends or DEADLINE seconds pass
#   bash model/training/train_on_gpu.sh feed SECONDS  # a later command with
#       .gpu2/train.jsonl.xz (a part of the training split that did not fit beside the
#       weights; each call may bring another): unpack it as the next part_N.jsonl where a
#       run started with `--more-corpus /tmp/corpus_more` looks, then `wait SECONDS` (0:
#       return at once; the run takes the part at its next look, `--more-check-seconds`)
#   bash model/training/train_on_gpu.sh eval  # held-out eval of the export on the GPU, to $OUT
#
# The project need not be installed on the machine: the checkout's lsp/, infill/ and model/
# are linked under $TMP/pkg/diffusion_infill, which goes on PYTHONPATH.
#
# GROW=2 before `start`/`run` grows the unpacked init to twice its layers
# (model/training/grow.py) before the run starts from it. An export over 60 MB (a grown
# model's bf16 weights) is packed to int8 before it is copied back (at most 64 MiB of files
# come back from the machine per command); training/release.py and the engine take the
# packed folder as it is.
#
# The run lives in /tmp/run on the machine and survives between commands while the machine
# stays up. Each `wait` returns the latest export as a tar split into 15 MiB parts (the
# largest file that comes back): join with `cat export.tar.* | tar x`.
set -u
# GPU_RUN_TMP, GPU_RUN_COMPILE=0 and PACK_OVER (bytes) are for a dry run on a CPU
# (tests/test_train_on_gpu.py); a GPU run leaves them unset.
TMP=${GPU_RUN_TMP:-/tmp}
RUN=$TMP/run
CORPUS=$TMP/corpus
MORE=$TMP/corpus_more  # pass --more-corpus $MORE to `run`/`start` to take `feed`'s rows
INIT=$TMP/init  # pass --init-from $INIT when .gpu/init travels
SNAP=$TMP/snap
PACK_OVER=${PACK_OVER:-60000000}
OUT=${OUT:-/tmp/out}
PKG=$TMP/pkg
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PKG:$TMP/site

link_package() {  # diffusion_infill.<name> -> ./<name>, for each folder the checkout has
    mkdir -p "$PKG/diffusion_infill"
    for name in lsp infill model; do
        [ -d "$name" ] && ln -sfn "$PWD/$name" "$PKG/diffusion_infill/$name"
    done
    return 0
}
link_package

unpack() {
    mkdir -p "$CORPUS" "$OUT"
    [ -s "$CORPUS/train.jsonl" ] || xz -T0 -dc .gpu/train.jsonl.xz > "$CORPUS/train.jsonl"
    for split in valid test; do
        if [ -f ".gpu/$split.jsonl.xz" ]; then xz -dc ".gpu/$split.jsonl.xz" > "$CORPUS/$split.jsonl"
        elif [ -f ".gpu/$split.jsonl" ]; then cp ".gpu/$split.jsonl" "$CORPUS/"; fi
    done
    if [ -d .gpu/init ] && [ ! -d "$INIT" ]; then
        python3 -m diffusion_infill.model.training.packing unpack .gpu/init "$INIT"
        # the tokenizer travels once, with the tracked model/weights
        [ -f "$INIT/tokenizer.json" ] || cp model/weights/tokenizer.json "$INIT/"
        if [ -n "${GROW:-}" ]; then
            python3 -m diffusion_infill.model.training.grow "$INIT" "$INIT.grown" --factor "$GROW" &&
                rm -rf "$INIT" && mv "$INIT.grown" "$INIT"
        fi
    fi
    if [ -d .gpu/whl ] && ! python3 -c "import tree_sitter_python" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target "$TMP/site" .gpu/whl/*.whl
    fi
    command -v nvidia-smi > /dev/null &&
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch, transformers; print('torch', torch.__version__,
        'transformers', transformers.__version__)"
    wc -c "$CORPUS"/*.jsonl
}

launch() {  # launch MINUTES EXTRA_ARGS...: the run under setsid, logging to $RUN.log
    local minutes=$1; shift
    mkdir -p "$RUN"
    : >> "$RUN.log"  # there at once, for a `tail` right after
    local tokenizer=()
    [ -f .gpu/tokenizer.json ] && tokenizer=(--tokenizer .gpu/tokenizer.json)
    setsid nohup python3 -m diffusion_infill.model.training.train --corpus "$CORPUS" "${tokenizer[@]}" \
        --out "$RUN" --minutes "$minutes" --quiet "$@" >> "$RUN.log" 2>&1 < /dev/null &
    echo $! > "$RUN.pid"
}

alive() { kill -0 "$(cat "$RUN.pid")" 2>/dev/null; }

copy_export() {  # a snapshot that loads (an evaluation may be writing the export)
    [ -d "$RUN/export" ] || { echo "no export yet"; return; }
    for _ in 1 2 3 4 5; do
        rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -r "$RUN/export" "$SNAP/" &&
            python3 -c "import safetensors.torch as s; s.load_file('$SNAP/export/model.safetensors')" &&
            break
        sleep 3
    done
    if [ "$(stat -c %s "$SNAP/export/model.safetensors")" -gt "$PACK_OVER" ]; then
        python3 -m diffusion_infill.model.training.packing pack "$SNAP/export" "$SNAP/packed" &&
            rm -rf "$SNAP/export" && mv "$SNAP/packed" "$SNAP/export"
    fi
    rm -f "$OUT"/export.tar.*
    tar -C "$SNAP" -cf - export | split -b 15M -d - "$OUT/export.tar."
    cp "$RUN.log" "$OUT/train.log"
    ls -la "$OUT"
}

exported() { stat -c %Y "$RUN/export/model.safetensors" 2>/dev/null || echo 0; }

start() {  # start MINUTES [args]
    local minutes=$1; shift
    unpack
    if [ "${GPU_RUN_COMPILE:-1}" = 0 ]; then launch "$minutes" "$@"; tail -5 "$RUN.log"; return; fi
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
}

follow() {  # follow END: until the run ends or $SECONDS reaches END, copying each new
    # export to $OUT as it is written (a command cut short still returns the last one)
    local end=$1 copied=0 stamp
    while [ $SECONDS -lt "$end" ] && alive; do
        sleep 5
        stamp=$(exported)
        if [ "$stamp" != 0 ] && [ "$stamp" != "$copied" ]; then
            sleep 2; copy_export > /dev/null; copied=$stamp
            grep "^step .* valid" "$RUN.log" | tail -1
        fi
    done
    grep -E "^(step|done|resumed|base|small)" "$RUN.log" | tail -40
    alive && echo "--- the run is still going; the export is its last evaluation's"
    alive || tail -20 "$RUN.log"
    copy_export
}

case "${1:-}" in
start)
    shift
    start "$@"
    ;;
run)
    shift
    minutes=$1 deadline=$2; shift 2
    start "$minutes" "$@"
    follow "$deadline"
    ;;
wait)
    follow $((SECONDS + $2))
    ;;
feed)
    # this call's part, after those of earlier calls: part_1.jsonl, part_2.jsonl, ...
    # (written under another name, then renamed: the run must never read half a file)
    mkdir -p "$MORE"
    part=$MORE/part_$(( $(find "$MORE" -name '*.jsonl' | wc -l) + 1 )).jsonl
    xz -T0 -dc .gpu2/train.jsonl.xz > "$MORE/part.tmp" && mv "$MORE/part.tmp" "$part"
    wc -c "$part"
    follow $((SECONDS + $2))
    grep "more training files" "$RUN.log" || echo "no part has joined the run yet"
    ;;
eval)
    python3 -m benchmarks.eval_model --model "$RUN/export" --corpus "$CORPUS" \
        --out "$OUT/eval.json" 2>&1 | grep -v "it/s\]$" | tail -60
    cp "$RUN.log" "$OUT/train.log"
    ;;
*)
    echo "usage: $0 start MINUTES [args] | wait SECONDS | run MINUTES DEADLINE [args] | feed SECONDS | eval" >&2; exit 2
    ;;
esac
