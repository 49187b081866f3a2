#!/usr/bin/env bash
# The GPU paths on one NVIDIA GPU, in one go, with the torch backend (no TensorFlow needed):
#
#   OUT=/tmp/gpu-proof lab/gpu_proof.sh [STEP ...]
#
# On a machine that cannot download, first fetch the wheels its image lacks, for its Python,
# into .whl/ (ignored by git) and copy that folder to the machine with the checkout, e.g.
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl ruptures
#
# Steps (default: all but knobs, which the baseline step covers; in this order):
# env       the machine, the driver, torch and what --hw=auto picks (always);
# bare      bare torch figures outside perfsuite (lab/gpu_bare.py);
# diag      which cuDNN kernels an fp32 conv runs with TF32 off and on (lab/gpu_diag.py);
# tests     perfsuite's own torch-backend tests on the GPU;
# baseline  a full-mode run of every GPU parameter of suites/ (STREAM, GEMM, host copies, conv,
#           the knobs; allreduce skips on one GPU), saved as the profile's baseline (refused
#           results stay out, as always), with its HTML report;
# knobs     the knobs (torch.compile, AMP, channels-last) alone, in quick mode;
# aa        an A/A rerun of STREAM and GEMM in quick mode, judged against that baseline;
# verdicts  the verdict benchmark (lab/verdicts.py) on the GPU's STREAM and GEMM checks
#           in quick mode: a baseline of 5 fresh runs, then A/A and 20%-slowdown runs in turn
#           until VERDICT_S (default 480) seconds are nearly spent; packed as verdicts.tgz
#           (not in the default steps: run it alone, `gpu_proof.sh verdicts`);
# samplelen the large GEMMs (8192³, every precision) at 0.1, 0.5 and 1 s samples, 2 fresh quick
#           runs each (lab/sample_length.py): does a longer sample average over the
#           power controller's course (not in the default steps; up to 7 minutes; the
#           records are packed as samplelen.tgz, so a cut-off step still leaves them);
# abaa      perfsuite ab, A/A (this interpreter on both sides) on the GPU's STREAM and GEMM
#           checks (AB_SELECT), every check in each of AB_ROUNDS (default 8) rounds, tolerance
#           AB_TOL (default 0.02): the record lab/ab_verdicts.py replays for power; budget
#           AB_AA_S seconds (default 300); packed as ab.tgz (not in the default steps);
# ab5       perfsuite ab with B slowed by 5% through -p perfsuite.slowdown, adaptive rounds,
#           budget AB_5_S seconds (default 200) (not in the default steps);
# rest      the torch CPU parameters of suites/ on the same machine, in quick mode, with what
#           is left of DEADLINE_S (seconds since the script started; default 560).
#
# Everything lands in $OUT: logs, and reports/ and baselines/ packed as proof.tgz after each
# step.  Each step has its own time limit, so one that hangs leaves the others' results.
set -u
OUT=${OUT:-/tmp/gpu-proof}
mkdir -p "$OUT"
: >"$OUT/steps.txt"
: >"$OUT/install.txt"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# Install perfsuite with its torch and gpu extras, offline, over the machine's own torch: what
# the image lacks comes as wheels in .whl/ (ruptures, on the 2026-11 image).  Where
# that cannot resolve, install it alone (--no-deps), and failing that load the plugin by name.
# An environment that has perfsuite already is left as it is.
PLUG=()
if $PY -c "import importlib.metadata as m; m.distribution('perfsuite')" 2>/dev/null; then
    echo "install: perfsuite was installed already" >>"$OUT/steps.txt"
elif [[ -d .whl ]] && $PY -m pip install --no-index --find-links .whl --no-build-isolation \
        -e '.[torch,gpu]' >"$OUT/install.txt" 2>&1; then
    echo "install: perfsuite[torch,gpu] resolved offline over the installed torch" >>"$OUT/steps.txt"
else
    if [[ -d .whl ]]; then
        echo "install: perfsuite[torch,gpu] did not resolve offline (install.txt); --no-deps"
    else
        echo "install: no .whl/ beside the checkout; perfsuite alone (--no-deps)"
    fi >>"$OUT/steps.txt"
    $PY -m pip install -q --no-deps --no-build-isolation --no-index -e . >>"$OUT/install.txt" 2>&1 \
        || PLUG=(-p perfsuite.plugin)
fi

{
    date -u
    nvidia-smi
    nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.max.sm,clocks.max.mem,power.limit,ecc.mode.current,pcie.link.gen.current,pcie.link.width.current --format=csv
    $PY -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version()); print(torch.cuda.get_device_properties(0))"
    $PY -m pip list 2>/dev/null | grep -iE '^(perfsuite|pytest|pytest-benchmark|jinja2|scipy|numpy|matplotlib|nvidia-ml-py|psutil|py-cpuinfo|tqdm) '
    echo "plugin: ${PLUG[*]:-entry point}"
    $PY -m perfsuite profiles
} >"$OUT/env.txt" 2>&1

COMMON=("${PLUG[@]}" -p no:cacheprovider --hw=auto --perf-backend torch -k gpu -rs --durations=0)
STEPS=("${@:-bare diag tests baseline aa rest}")
STEPS=(${STEPS[*]})
step() {  # step NAME SECONDS command...: run it if asked for, then pack what was written
    local name=$1 limit=$2
    shift 2
    [[ " ${STEPS[*]} " == *" $name "* ]] || return 0
    local t0=$SECONDS
    timeout --signal=INT --kill-after=20 "$limit" "$@" >"$OUT/$name.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
    tar czf "$OUT/proof.tgz" reports baselines
}

step bare 30 $PY lab/gpu_bare.py
step diag 45 $PY lab/gpu_diag.py
step tests 45 $PY -m pytest tests/test_torch_backend.py "${PLUG[@]}" -p no:cacheprovider -q

# Full mode with 5 samples a check (SAMPLES=10 for full mode's own 10): about 3 s a case, most
# of it warm-up, samples and bare reference; on an H100 the 124 GPU cases of suites/ (97 run,
# 27 skipped) took 298 s.
step baseline 330 $PY -m pytest suites/ "${COMMON[@]}" --perf-save-baseline --perf-samples "${SAMPLES:-5}"
step knobs 100 $PY -m pytest suites/test_knobs.py "${COMMON[@]}" --perf-quick
step aa 55 $PY -m pytest suites/test_memory_bandwidth.py suites/test_gemm.py "${COMMON[@]}" \
    --perf-quick
SWORK=/tmp/perfsuite-samplelen
step samplelen 420 $PY lab/sample_length.py --seconds 0.1,0.5,1 --runs 2 \
    --work "$SWORK" -- suites/test_gemm.py "${PLUG[@]}" \
    --perf-backend torch -k "gpu and 8192x8192x8192" --perf-quick
[[ " ${STEPS[*]} " == *" samplelen "* && -d $SWORK/reports ]] \
    && tar czf "$OUT/samplelen.tgz" -C "$SWORK" reports
VERDICT_S=${VERDICT_S:-480}
VWORK=/tmp/perfsuite-verdicts
step verdicts "$VERDICT_S" $PY lab/verdicts.py --mode quick --backends torch \
    --select "gpu and (test_stream or test_gemm)" --baseline-runs 5 --reruns 10 --power-runs 10 \
    --skip-taskset --deadline-s $((VERDICT_S - 25)) --work "$VWORK"
[[ " ${STEPS[*]} " == *" verdicts "* && -d $VWORK ]] && tar czf "$OUT/verdicts.tgz" -C "$VWORK" .
# The A/B engine on the GPU: both sides this interpreter, its perfsuite and torch.
ABPY=$(command -v "$PY")
ABSEL=(suites/test_memory_bandwidth.py suites/test_gemm.py "${PLUG[@]}" -p perfsuite.slowdown
    --hw=auto --perf-backend torch -k "${AB_SELECT:-gpu}")
ABTOL=${AB_TOL:-0.02}
step abaa $(( ${AB_AA_S:-300} + 90 )) $PY -m perfsuite ab --a "$ABPY" --b "$ABPY" --seed 1 \
    --min-rounds "${AB_ROUNDS:-8}" --max-rounds "${AB_ROUNDS:-8}" --budget "${AB_AA_S:-300}s" \
    --tolerance "$ABTOL" --output-dir reports/ab-aa -- "${ABSEL[@]}"
step ab5 $(( ${AB_5_S:-200} + 90 )) $PY -m perfsuite ab --a "$ABPY" --b "$ABPY" --seed 2 \
    --b-env PERFSUITE_INJECT_SLOWDOWN=0.05 --budget "${AB_5_S:-200}s" --tolerance "$ABTOL" \
    --output-dir reports/ab-5 -- "${ABSEL[@]}"
[[ -d reports/ab-aa || -d reports/ab-5 ]] && tar czf "$OUT/ab.tgz" reports/ab-aa reports/ab-5 2>/dev/null
LEFT=$(( ${DEADLINE_S:-560} - SECONDS - 10 ))
if (( LEFT > 20 )); then
    step rest "$LEFT" $PY -m pytest suites/ "${PLUG[@]}" -p no:cacheprovider --hw=auto \
        --perf-backend torch -k "not gpu" -rs --perf-quick
elif [[ " ${STEPS[*]} " == *" rest "* ]]; then
    echo "rest: skipped, ${LEFT} s left of DEADLINE_S" | tee -a "$OUT/steps.txt"
fi
ls -la "$OUT"
