#!/bin/bash
# Builds .gpu/ (git-ignored through .git/info/exclude), what benchmarks/gpu/gpu_checklist.sh needs on a lent GPU machine
# that has torch, lightning, transformers and sentence-transformers but not our other pure-Python dependencies, no
# network and no ../shared: the wheels (Python 3.12), the data the checks read, the bert-base-uncased tokenizer.
# Models travel as seeds: benchmarks/tools/bench_models.py builds them there (BERT-base and MiniLM-L6 size, the quickstart's).
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}; DATA=${STS_DATA_DIR:-../shared/data}; B=.gpu
[ -x "$PY" ] || PY=python3   # from a git worktree: PYTHON=<the project venv>
EXCLUDE=$(git rev-parse --git-path info/exclude)   # .git/info/exclude, also from a worktree
mkdir -p "$(dirname "$EXCLUDE")" && (grep -qx "/$B/" "$EXCLUDE" 2>/dev/null || echo "/$B/" >> "$EXCLUDE")
rm -rf $B && mkdir -p $B/whl $B/data/nli $B/data/sts $B/data/wiki $B/tok
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 -d $B/whl hydra-core==1.3.8 omegaconf==2.3.1
$PY -m pip wheel -q --no-deps -w $B/whl antlr4-python3-runtime==4.9.3   # an sdist only: built here, pure Python
cp -r "$DATA/stsb" "$DATA/sick" $B/data/ && cp -r "$DATA/nli/snli" $B/data/nli/
cp -r "$DATA/sts/STS2012-en-test" "$DATA/sts/STS2016-en-test" $B/data/sts/
head -20000 "$DATA/wiki/wiki_sentences_100k.txt" > $B/data/wiki/wiki_sentences_100k.txt   # SimCSE's sentences
TOK=$($PY -c "from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir as t; print(t())")
for f in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
  [ -f "$TOK/$f" ] && cp "$TOK/$f" $B/tok/
done
du -sh $B; echo "tracked files: $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1)"
