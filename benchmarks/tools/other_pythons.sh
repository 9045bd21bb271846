#!/bin/bash
# The package under another CPython, as far as the registries allow: torch 2.13.0 for cp312/cp313 is only
# PyPI's CUDA build, whose nvidia-cudnn-cu13 this machine's registry lacks (and download.pytorch.org's CPU index is
# unreachable), so this runs the torch-free paths of the wheel: install, compile every module, `sts-train --help`,
# every model's composition (the constructors' defaults registered by Hydra's plugin discovery, no call of ours),
# a one-line config error. Needs PyPI. Usage:
#   pip wheel --no-deps . -w /tmp/whl && bash benchmarks/tools/other_pythons.sh <python3.12> /tmp/whl/sts_lightning-*.whl
set -u
PY=$1; WHEEL=$2; V=/tmp/pycheck-$($PY -c 'import sys; print("%d%d" % sys.version_info[:2])')
rm -rf $V && $PY -m venv $V || exit 1
$V/bin/pip install -q hydra-core==1.3.8 omegaconf==2.3.1 PyYAML==6.0.4 numpy==2.4.6 2>&1 | grep -v "is ignored" || true
$V/bin/pip install -q --no-deps "$WHEEL" 2>&1 | grep -v "is ignored" || true
cd /tmp
echo "== $($V/bin/python --version)"
SITE=$($V/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
$V/bin/python -m compileall -q "$SITE/sts_lightning" "$SITE/hydra_plugins" && echo "compileall: ok ($(find $SITE/sts_lightning -name '*.py' | wc -l) modules)"
$V/bin/sts-train --help | head -3
$V/bin/python - <<'PY'
import glob, os, sys
from hydra import compose, initialize_config_dir
import sts_lightning
cfgdir = os.path.join(os.path.dirname(sts_lightning.__file__), "configs")
models = sorted(os.path.basename(p)[:-5] for p in glob.glob(f"{cfgdir}/model/*.yaml"))
with initialize_config_dir(config_dir=cfgdir, version_base="1.3"):  # no call of ours: Hydra's plugin registers
    for m in models:
        cfg = compose(config_name="train", overrides=[f"model={m}", "paths.data_dir=/d"])
        assert "torch" not in sys.modules
print(f"composed {len(models)} models (every constructor default from the plugin), torch imported: {'torch' in sys.modules}")
PY
$V/bin/sts-train model=simcse model.temprature=0.1; echo "exit $?"
