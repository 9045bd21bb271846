#!/bin/bash
# Every GPU figure of docs/speed.md from ONE call of a lent GPU machine (the device tool), at most 8 minutes:
#   bash benchmarks/gpu/gpu_bundle.sh                     # here, once: wheels, a data subset, the tokenizer -> .gpu/
#   run: bash benchmarks/gpu/gpu_checklist.sh  (carry [".gpu"], timeout_s 540)
# Checks (GPU_CHECKS=a,b runs only those; default: the set below, in this order):
#   machine           card, driver, versions
#   encode_bert_base  ours vs sentence-transformers, random BERT-base (12x768), fp32 / bf16 / fp16, like for like,
#                     ST at its best batch of 32/128/512, 20,000 Wikipedia sentences; Spearman vs the padded path
#   train_steps       bf16 training steps, BERT-base, batch 64: SimCSE (len 32), SBERT-NLI softmax and MNRL, CoSENT
#                     (len 128), MLM packed (len 128), CT; both sides bf16 autocast; MFU, idle, memory
#   e2e_quickstart / e2e_simcse / e2e_mlm   train.py end to end (benchmarks/speed/step_meter.py): steps/s, tokens/s, MFU
#   encode_minilm     the encode comparison at MiniLM-L6 size (6x384), 10,000 sentences
# By name only (a second call): encode_engine (packed vs padded and token budgets, which attention kernel ran),
# train_profile (SBERT-NLI and CT, fp32 vs bf16-mixed, one vs two length groups: kernels, syncs, casts).
# Older checks, by name only: quickstart_gpu, evaluate, mixed_precision, resume, quickstart_auto (and budget_probe).
# Each check runs under its own time budget (cut when over it: the log says so, the rest go on), all of them under
# GPU_TOTAL_S (default 460 s); every figure goes to $OUT/gpu_figures.md and .json (benchmarks/gpu/gpu_figures.py).
# GPU_CHECK_DEVICE=cpu rehearses the whole script on a CPU (tiny model, few steps, no fp16; budgets x8).
set -u
OUT=${OUT:-/tmp/gpu_checklist_out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/checklist.log") 2>&1
B=${GPU_BUNDLE:-.gpu}; R=${GPU_RUNS:-/tmp/gpu_runs}; rm -rf "$R"; mkdir -p "$R/records"
DEV=${GPU_CHECK_DEVICE:-cuda}; PY=${PYTHON:-python3}; START=$SECONDS
# a CPU rehearsal runs the same checks far slower (2 loaded cores): its budgets are scaled up, not its work
if [ "$DEV" = cuda ]; then SCALE=${GPU_BUDGET_SCALE:-1}; TOTAL=${GPU_TOTAL_S:-460}; else SCALE=${GPU_BUDGET_SCALE:-8}; TOTAL=${GPU_TOTAL_S:-3600}; fi
CHECKS=${GPU_CHECKS:-machine,encode_bert_base,train_steps,e2e_quickstart,e2e_simcse,e2e_mlm,encode_minilm}
if [ -d "$B/whl" ] && [ "${SKIP_WHEELS:-0}" != 1 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "${GPU_SITE:-/tmp/site}" "$B"/whl/*.whl
  export PYTHONPATH=${GPU_SITE:-/tmp/site}:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONUNBUFFERED=1
export STS_DATA_DIR=$PWD/$B/data STS_CACHE_DIR=$R/cache STS_BENCH_MODELS=$R/models
[ -d "$STS_DATA_DIR" ] || export STS_DATA_DIR=${STS_FALLBACK_DATA:-../shared/data}
TOK=$PWD/$B/tok; [ -f "$TOK/vocab.txt" ] || TOK=$($PY -c "from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir as t; print(t())")
REC=$R/records; CHECKS_FILE=$OUT/checks.jsonl; : > "$CHECKS_FILE"
if [ "$DEV" = cuda ]; then
  TR="trainer=gpu trainer.precision=bf16-mixed"; BASE=bert-base; MINI=minilm-l6; PRECS=bf16,fp16,fp32; WIKI=20000
  WIKI_MINI=10000; REP=3; TRAIN="--batch-size 64 --steps 20 --warmup 3"; QS_STEPS=150; E2E_STEPS=150; STEPS=398
  SHORT=100; HALF=fp16
else  # the rehearsal: the same commands on a tiny model, a few sentences and steps
  TR=trainer=cpu; BASE=tiny; MINI=tiny; PRECS=bf16,fp32; WIKI=200; WIKI_MINI=100; REP=1
  TRAIN="--batch-size 8 --steps 2 --warmup 1 --meter-steps 1"; QS_STEPS=14; E2E_STEPS=14; STEPS=12; SHORT=6; HALF=bf16
fi
wanted() { [[ ",$CHECKS," == *",$1,"* ]]; }
check() {  # check <name> <budget s> <command...>: run it within its budget and what is left of GPU_TOTAL_S
  local name=$1 limit=$(($2 * SCALE)); shift 2
  wanted "$name" || return 0
  local left=$((TOTAL - (SECONDS - START)))
  if [ "$left" -lt 10 ]; then
    echo "=== $name: skipped, no time left of GPU_TOTAL_S=$TOTAL"
    echo "{\"check\": \"$name\", \"rc\": null, \"seconds\": 0, \"budget\": 0, \"note\": \"skipped: no time left\"}" >> "$CHECKS_FILE"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo; echo "=== $name (budget ${limit} s): $*"; local t0=$SECONDS
  timeout -k 5 "$limit" "$@"; local rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && echo "=== $name CUT after ${limit} s (its budget): what it finished is kept"
  echo "=== $name rc=$rc in $((SECONDS - t0)) s"
  echo "{\"check\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - t0)), \"budget\": $limit}" >> "$CHECKS_FILE"
}
model() { $PY -c "from benchmarks.tools.bench_models import sized_model as m; print(m('$1', tokenizer_dir='$TOK'))"; }
# the padded path (embeddings/encoders/packing.py) to compare the Spearman of ours (packing=auto: packed on CUDA) with
M_BASE=; M_MINI=; REF=packing=padded
ENC="--device $DEV --tokenizer $TOK --json $REC/encode.jsonl --repeats $REP --extra-fp32-peer ${REF:+--reference-kwargs $REF}"
METER="+callbacks.step_meter._target_=benchmarks.speed.step_meter.StepMeter +callbacks.step_meter.out=$REC/e2e.jsonl"
ONE="callbacks.sts_evaluation.tasks=[stsb-dev] callbacks.sts_evaluation.eval_at_start=false"

if wanted machine; then
  echo "=== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  $PY -c "import json; from benchmarks.gpu.gpu_figures import machine; print(json.dumps(machine()))"
fi
if wanted encode_bert_base || wanted train_steps || wanted e2e_simcse || wanted e2e_mlm; then M_BASE=$(model $BASE); fi
check encode_bert_base 150 $PY -m benchmarks.speed.encode_speed --size $BASE --precision $PRECS --wiki $WIKI $ENC
check train_steps 120 $PY -m benchmarks.speed.train_speed --size $BASE --tokenizer $TOK --device $DEV $TRAIN \
  --precision bf16-mixed --methods simcse,nli,mnrl,cosent,mlm,ct --simcse-max-length 32 --nli-max-length 128 \
  --mlm-max-length 128 --fp32-reference nli,ct --json $REC/train.jsonl
if wanted e2e_quickstart || wanted quickstart_gpu || wanted resume || wanted quickstart_auto; then  # bert-random-4x256
  $PY -c "from sts_lightning.embeddings.encoders.random_bert import make_random_bert as m; m('$R/rb', '$TOK', layers=4, hidden=256, heads=4, seed=0)"
fi
QS="experiment=quickstart model.model_name_or_path=$R/rb callbacks.progress_log.every_s=0.2"
check e2e_quickstart 55 $PY train.py $QS $TR trainer.max_steps=$QS_STEPS $ONE $METER +callbacks.step_meter.run=quickstart hydra.run.dir=$R/e2e_qs
check e2e_simcse 40 $PY train.py model=simcse model.model_name_or_path=$M_BASE $TR trainer.max_steps=$E2E_STEPS data.batch_size=64 model.max_length=32 $ONE $METER +callbacks.step_meter.run=simcse hydra.run.dir=$R/e2e_simcse
check e2e_mlm 40 $PY train.py model=mlm model.model_name_or_path=$M_BASE $TR trainer.max_steps=$E2E_STEPS data.batch_size=64 model.max_length=128 $ONE $METER +callbacks.step_meter.run=mlm hydra.run.dir=$R/e2e_mlm
if wanted encode_minilm; then M_MINI=$(model $MINI); echo "MiniLM-L6 size: $M_MINI"; fi
check encode_minilm 70 $PY -m benchmarks.speed.encode_speed --size $MINI --precision $PRECS --wiki $WIKI_MINI $ENC

if wanted encode_engine || wanted train_profile; then [ -n "$M_BASE" ] || M_BASE=$(model $BASE); fi
check encode_engine 120 $PY -m benchmarks.speed.encode_engine --device $DEV --precision ${PRECS%%,*} --model $M_BASE --budgets 16384 32768 65536 131072
for m in nli ct; do
  wanted train_profile || continue
  CHECKS=$CHECKS,train_profile_$m check "train_profile_$m" 90 $PY -m benchmarks.speed.train_profile --method $m --device $DEV --model $M_BASE ${TRAIN%% --meter*} --groups 1,2
done

check budget_probe 1 sleep 4   # by name only: shows that a check over its budget is cut and the rest go on

# ---- older checks (resume and precision on a GPU), by name only: GPU_CHECKS=quickstart_gpu,evaluate,mixed_precision,resume
grep_last() { grep -h "$1" "$2" 2>/dev/null | tail -"${3:-3}"; }
check quickstart_gpu 200 $PY train.py $QS $TR trainer.max_steps=$STEPS hydra.run.dir=$R/qs > $R/qs.log 2>&1
wanted quickstart_gpu && { grep_last "precision\|Using\|GPU available" $R/qs.log 6; cat $R/qs/sts_before_after.md 2>/dev/null; }
for p in fp32 bf16 $HALF; do
  wanted evaluate && [ -d $R/qs/export ] || continue
  CHECKS=$CHECKS,evaluate_$p check "evaluate_$p" 90 $PY evaluate.py "encoders=[$R/qs/export]" encoder.device=$DEV encoder.precision=$p hydra.run.dir=$R/eval_$p > $R/eval_$p.log 2>&1
  head -12 $R/eval_$p/results.md 2>/dev/null
done
for prec in 16-mixed bf16-mixed; do
  wanted mixed_precision && ! { [ "$DEV" = cpu ] && [ $prec = 16-mixed ]; } || continue
  CHECKS=$CHECKS,simcse_$prec check "simcse_$prec" 100 $PY train.py model=simcse model.model_name_or_path=$R/rb ${TR%% *} trainer.precision=$prec trainer.max_steps=$SHORT $ONE hydra.run.dir=$R/simcse_$prec > $R/simcse_$prec.log 2>&1
  grep_last "precision\|loss\|stsb-dev\|error" $R/simcse_$prec.log 4
done
# a resume after kill -9 and after SIGTERM (exit 75, last.ckpt at the step), each against the uninterrupted run
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
if wanted resume; then
  RS="$QS $TR trainer.max_steps=$SHORT callbacks.last_checkpoint.every_n_train_steps=5 $ONE"
  CHECKS=$CHECKS,resume_full,resume_after_kill,resume_after_sigterm
  check resume_full 100 $PY train.py $RS hydra.run.dir=$R/full > $R/full.log 2>&1
  interrupt killed KILL
  check resume_after_kill 100 $PY train.py $RS hydra.run.dir=$R/killed ckpt_path=last > $R/resumed.log 2>&1
  compare killed
  interrupt preempted TERM
  check resume_after_sigterm 100 $PY train.py $RS hydra.run.dir=$R/preempted ckpt_path=last > $R/preempted_resumed.log 2>&1
  compare preempted
fi
check quickstart_auto 100 $PY train.py $QS trainer.devices=1 trainer.max_steps=$SHORT $ONE hydra.run.dir=$R/auto > $R/auto.log 2>&1
wanted quickstart_auto && grep_last "precision\|Using\|GPU available" $R/auto.log 4

echo; echo "=== figures"; $PY -m benchmarks.gpu.gpu_figures --records "$REC" --checks "$CHECKS_FILE" --out "$OUT"
cat "$OUT/gpu_figures.md"
echo "=== whole call: $((SECONDS - START)) s of checks (GPU_TOTAL_S=$TOTAL)"
for f in qs full killed resumed preempted; do cp $R/$f.log "$OUT/" 2>/dev/null; done
cp "$REC"/*.jsonl "$OUT/" 2>/dev/null
true
