"""Unit tests (no server, no child process): tf_contrib_easgd.runner.launcher and local
mode's exit code.

The tests of its other tiers are in tests/subprocess/test_launcher.py.
"""

import pytest

from tf_contrib_easgd.runner import launcher, local
from tf_contrib_easgd.runner.launcher import LocalCluster


def test_describe_exit():
    assert launcher.describe_exit(0) == "exited with code 0"
    assert launcher.describe_exit(-15) == "was killed by signal SIGTERM"


def test_max_restarts_must_not_be_negative():
    with pytest.raises(ValueError, match="max_restarts must be >= 0, got -1"):
        LocalCluster([], max_restarts=-1)


# What TensorFlow printed as it started a server on this CPU-only machine: TF 2.21 (before
# absl's logging starts), then TF 2.15.
TF221_START_UP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796356605.400633   22253 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors.",
    "I0000 00:00:1796356605.401069   22253 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1796356605.462033   22253 cpu_feature_guard.cc:227] This TensorFlow binary "
    "is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other "
    "operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1796356606.982446   22253 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1796356609.003363   22253 grpc_server_lib.cc:467] Started server with target: "
    "grpc://127.0.0.1:23001",
]


TF215_START_UP = [
    "2026-12-04 04:04:41.968241: I tensorflow/core/util/port.cc:113] oneDNN custom operations "
    "are on.",
    "2026-12-04 04:04:42.031080: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261]"
    " Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when "
    "one has already been registered",
    "2026-12-04 04:04:42.031134: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:607] "
    "Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when "
    "one has already been registered",
    "2026-12-04 04:04:42.035875: E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:1515"
    "] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS "
    "when one has already been registered",
    "2026-12-04 04:04:42.938295: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT "
    "Warning: Could not find TensorRT",
]


# A task's own words, Python's, and TensorFlow's other warnings and errors: all shown.
KEPT = [
    "easgd-train: worker 0: error: could not write a checkpoint to /shared/run1",
    "Traceback (most recent call last):",
    '  File "/x/tensorflow/python/client/session.py", line 1407, in _do_call',
    "tensorflow.python.framework.errors_impl.NotFoundError: Key v0 not found in checkpoint",
    "W0000 00:00:1796356610.123456   22253 op_kernel.cc:1830] OP_REQUIRES failed at "
    "save_restore_v2_ops.cc:250 : NOT_FOUND: Key v0 not found in checkpoint",
    "2026-12-04 04:04:50.000001: E tensorflow/core/distributed_runtime/master.cc:123] "
    "CreateSession failed because worker /job:ps/task:0 returned error: UNAVAILABLE",
    "I am a line of a user's own that starts with a capital I",
]


@pytest.mark.parametrize("line", TF221_START_UP + TF215_START_UP)
def test_tensorflows_start_up_lines_are_recognised(line):
    assert local.is_tensorflow_start_up_line(line)


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_kept(line):
    assert not local.is_tensorflow_start_up_line(line)
