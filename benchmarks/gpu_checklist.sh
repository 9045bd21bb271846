#!/bin/bash
# The GPU checklist (../shared/gpu-checklist.md) in one command for a lent GPU machine (the device tool):
#   bash benchmarks/gpu_bundle.sh                     # here, once: wheels, a data subset, the tokenizer -> .gpu/
#   run: bash benchmarks/gpu_checklist.sh  (carry [".gpu"], timeout_s 580)
# Every check runs under its own timeout, so one failure or hang does not stop the rest; the log and a summary go
# to $OUT. GPU_CHECK_DEVICE=cpu rehearses the script on a CPU machine (tiny steps, no fp16).
set -u
OUT=${OUT:-/tmp/gpu_checklist_out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/checklist.log") 2>&1
B=${GPU_BUNDLE:-.gpu}; R=${GPU_RUNS:-/tmp/gpu_runs}; rm -rf "$R"; mkdir -p "$R"
DEV=${GPU_CHECK_DEVICE:-cuda}; PY=${PYTHON:-python3}
if [ -d "$B/whl" ] && [ "${SKIP_WHEELS:-0}" != 1 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$B"/whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export STS_DATA_DIR=$PWD/$B/data STS_CACHE_DIR=$R/cache
if [ "$DEV" = cuda ]; then TR=trainer=gpu; STEPS=398; SHORT=100; HALF=fp16; else TR=trainer=cpu; STEPS=12; SHORT=6; HALF=bf16; fi
SUMMARY=()
check() {  # check <name> <timeout s> <command...>: run it, keep rc and seconds for the summary
  local name=$1 limit=$2; shift 2
  echo; echo "=== $name: $*"; local t0=$SECONDS
  timeout "$limit" "$@"; local rc=$?
  SUMMARY+=("$name rc=$rc $((SECONDS - t0))s"); echo "=== $name rc=$rc in $((SECONDS - t0)) s"
}
grep_last() { grep -h "$1" "$2" 2>/dev/null | tail -"${3:-3}"; }

echo "=== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
$PY - <<'PY'
import lightning, sentence_transformers, torch, transformers
print("python", __import__("sys").version.split()[0], "| torch", torch.__version__, "| lightning", lightning.__version__,
      "| transformers", transformers.__version__, "| sentence-transformers", sentence_transformers.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-",
      "| bf16 supported", torch.cuda.is_available() and torch.cuda.is_bf16_supported())
PY
# bert-random-4x256, built from its seed over the carried tokenizer (the packaged MiniLM does not travel)
$PY -c "from sts_lightning.embeddings.encoders.random_bert import make_random_bert as m; m('$R/rb', '$B/tok', layers=4, hidden=256, heads=4, seed=0)"
QS="experiment=quickstart model.model_name_or_path=$R/rb callbacks.progress_log.every_s=0.2"
ONE="callbacks.sts_evaluation.tasks=[stsb-dev] callbacks.sts_evaluation.eval_at_start=false"

# 1. the quickstart on the GPU: precision line, steps/s, the before/after table, the export
check quickstart_gpu 200 $PY train.py $QS $TR trainer.max_steps=$STEPS hydra.run.dir=$R/qs > $R/qs.log 2>&1
grep_last "precision\|Using\|GPU available" $R/qs.log 6; grep_last "train: " $R/qs.log 2; cat $R/qs/sts_before_after.md 2>/dev/null
grep_last "finished in\|export" $R/qs.log 3

# 3. evaluate.py on that export in fp32 / bf16 / fp16: Spearman and sentences/s
for p in fp32 bf16 $HALF; do
  check "evaluate_$p" 90 $PY evaluate.py "encoders=[$R/qs/export]" encoder.device=$DEV encoder.precision=$p hydra.run.dir=$R/eval_$p > $R/eval_$p.log 2>&1
  cat $R/eval_$p/results.md 2>/dev/null | head -12; grep_last "sent/s\|sentences/s\|encod" $R/eval_$p.log 3
done

# 2. mixed precision for a contrastive method (SimCSE: in-batch InfoNCE stays fp32)
for prec in 16-mixed bf16-mixed; do
  [ "$DEV" = cpu ] && [ $prec = 16-mixed ] && continue
  check "simcse_$prec" 100 $PY train.py model=simcse model.model_name_or_path=$R/rb $TR trainer.precision=$prec trainer.max_steps=$SHORT $ONE hydra.run.dir=$R/simcse_$prec > $R/simcse_$prec.log 2>&1
  grep_last "precision\|loss\|stsb-dev\|error" $R/simcse_$prec.log 4
done

# 5. a resume on the GPU after kill -9, and after SIGTERM (preemption: exit 75, last.ckpt at the step): each
# resumed run against the uninterrupted one
compare() {  # compare <run>: the resumed run <run> against "full"
$PY - "$R" "$1" <<'PY'
import json, sys
from pathlib import Path
import torch
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE
from sts_lightning.embeddings.io.model_card import CARD_FILE
r, run = Path(sys.argv[1]), sys.argv[2]
a, b = (load_checkpoint(r / n / "checkpoints" / "last.ckpt") for n in ("full", run))
diffs = {k: (a["state_dict"][k].float() - b["state_dict"][k].float()).abs().max().item() for k in a["state_dict"]}
same = sum(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
ea, eb = ({k: v for k, v in json.loads((r / n / "export" / MANIFEST_FILE).read_text())["files"].items()
           if k != CARD_FILE} for n in ("full", run))  # the card holds the wall time
print(f"{run} resumed: steps {a['global_step']} / {b['global_step']}; {same}/{len(diffs)} tensors bit-equal; "
      f"max abs diff {max(diffs.values()):.3e}; export files (card aside) SHA-256 equal: {ea == eb}")
PY
}
interrupt() {  # interrupt <run> <signal>: start the run, send the signal half-way, print the exit code
  $PY train.py $RS hydra.run.dir=$R/$1 > $R/$1.log 2>&1 & local pid=$! n=
  for _ in $(seq 600); do n=$(grep -o 'train: [0-9]*/' $R/$1.log 2>/dev/null | tail -1 | grep -o '[0-9]*'); [ -n "$n" ] && [ "$n" -ge $((SHORT / 2)) ] && break; sleep 0.1; done
  kill -"$2" $pid; wait $pid; echo "$1: SIG$2 after progress step ${n:-?}: exit code $?"; grep_last "stopped:" $R/$1.log 1
}
RS="$QS $TR trainer.max_steps=$SHORT callbacks.last_checkpoint.every_n_train_steps=5 $ONE"
check resume_full 100 $PY train.py $RS hydra.run.dir=$R/full > $R/full.log 2>&1
interrupt killed KILL
check resume_after_kill 100 $PY train.py $RS hydra.run.dir=$R/killed ckpt_path=last > $R/resumed.log 2>&1
compare killed
interrupt preempted TERM
check resume_after_sigterm 100 $PY train.py $RS hydra.run.dir=$R/preempted ckpt_path=last > $R/preempted_resumed.log 2>&1
compare preempted

# 4. encode and train speed against sentence-transformers on the same device (the quickstart export as model)
check encode_speed 120 $PY -m benchmarks.encode_speed --model $R/qs/export --device $DEV --repeats 3
check encode_speed_bf16 120 $PY -m benchmarks.encode_speed --model $R/qs/export --device $DEV --precision bf16 --repeats 3
check train_speed 150 $PY -m benchmarks.train_speed --model $R/qs/export --device $DEV --methods ct,nli,simcse --steps 20

# 1b. the default trainer (accelerator / precision auto) on one device
check quickstart_auto 100 $PY train.py $QS trainer.devices=1 trainer.max_steps=$SHORT $ONE hydra.run.dir=$R/auto > $R/auto.log 2>&1
grep_last "precision\|Using\|GPU available" $R/auto.log 4

echo; echo "=== summary"; printf '%s\n' "${SUMMARY[@]}"
for f in qs full killed resumed preempted; do cp $R/$f.log "$OUT/" 2>/dev/null; done
