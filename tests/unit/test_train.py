"""Tests of easgd-train (tf_contrib_easgd.trainer.cli): flags, TF_CONFIG, local and task mode.

Flag checks run in this process; the command line's own cases are in
tests/subprocess/test_train_subprocess.py. tests/e2e/test_train_e2e.py starts real ps/worker
processes: local mode through the command line, task mode from TF_CONFIG with processes the
test starts itself, and a failing worker. tests/e2e/test_end_to_end.py has task mode by flags.
"""

import re

import pytest
from absl import app, flags
from absl.testing import flagsaver
from trainer_configs import PS, W0, W1
from trainer_configs import tf_config as _tf_config

from tf_contrib_easgd.trainer import cli as train
from tf_contrib_easgd.trainer import cluster
from tf_contrib_easgd.trainer.config import (
    DEFAULT_LEARNING_RATES,
    TrainConfig,
    UsageError,
    describe_exchange,
    plan_from_flags,
)


@pytest.fixture
def parse():
    """Parses easgd-train's flags (and a TF_CONFIG) in this process; returns the Plan."""
    was_parsed = train.FLAGS.is_parsed()

    def parse_(*args, environ=None):
        train.FLAGS.unparse_flags()
        train.FLAGS(["easgd-train", *args])
        return plan_from_flags(train.FLAGS, environ={} if environ is None else environ)

    with flagsaver.flagsaver():
        yield parse_
    train.FLAGS.unparse_flags()
    if was_parsed:
        train.FLAGS.mark_as_parsed()


def test_defaults_run_one_ps_and_two_workers_locally(parse):
    plan = parse()
    assert (plan.task, plan.num_ps, plan.num_workers, plan.max_restarts) == (None, 1, 2, 0)
    assert plan.config == TrainConfig(
        steps=1000,
        batch_size=32,
        optimizer="momentum",
        learning_rate=0.05,  # The default of --optimizer=momentum.
        communication_period=10,
        moving_rate=0.45,  # easgd-train's: the paper's 0.9 / 2 workers.
        rho=0.0,
        synchronous=False,
        overlap=False,  # On loopback, as --wire_dtype below: what trained fastest there.
        model="mlp",
        dataset="digits",
        model_dir="",  # main() makes a temporary directory.
        save_checkpoint_steps=500,
        seed=0,
        log_every_steps=100,
        eval_every_steps=500,
        timeout_secs=300.0,
        wire_dtype="float32",
        reuse_freed_memory=True,
    )


def test_task_mode_exchanges_over_a_network_with_easgd_trains_defaults(parse):
    # Three workers: moving rate 0.9 / 3 = 0.3; across a network, overlap and a 16-bit wire.
    plan = parse("--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0},{W1},w2:2222")
    assert (plan.config.moving_rate, plan.config.overlap, plan.config.wire_dtype) == (
        0.3,
        True,
        "bfloat16",
    )


def test_one_worker_does_not_overlap_by_default(parse):
    # Its moving rate is 0.9 / 1, above 0.5: a late move would take back its progress.
    config = parse("--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0}").config
    assert (config.moving_rate, config.overlap, config.wire_dtype) == (0.9, False, "bfloat16")


def test_exchange_flags_win_over_easgd_trains_defaults(parse):
    config = parse(
        "--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0}",
        "--moving_rate=0.1", "--nooverlap", "--wire_dtype=float16",
    ).config  # fmt: skip
    assert (config.moving_rate, config.overlap, config.wire_dtype) == (0.1, False, "float16")


def test_the_settings_line_names_easgd_trains_defaults_and_the_librarys(parse):
    plan = parse()
    line = describe_exchange(plan.config, plan.num_workers, train.FLAGS)
    # Contrib's moving rate: 0.9 / 10 / 2 = 0.045.
    assert line == (
        "easgd-train: EASGD communication_period 10, moving_rate 0.45 (0.9 / 2 workers), "
        "rho 0, overlap off, wire float32; moving_rate, rho, overlap, wire_dtype are "
        "easgd-train's defaults (measured fastest here: docs/TUNING.md), not the library's, "
        "which are contrib's: moving_rate 0.045, rho = moving_rate / learning_rate, overlap "
        "off, float32"
    )
    plan = parse("--moving_rate=0.2", "--rho=0.1", "--overlap", "--wire_dtype=bfloat16")
    line = describe_exchange(plan.config, plan.num_workers, train.FLAGS)
    assert line == (
        "easgd-train: EASGD communication_period 10, moving_rate 0.2, rho 0.1, overlap on, "
        "wire bfloat16"
    )
    # --api=keras sends float32, the library's own default: not named among easgd-train's.
    plan = parse("--api=keras")
    line = describe_exchange(plan.config, plan.num_workers, train.FLAGS)
    assert "wire float32; moving_rate, rho, overlap are easgd-train's defaults" in line


@pytest.mark.parametrize(("optimizer", "rate"), list(DEFAULT_LEARNING_RATES.items()))
def test_each_optimizer_has_a_default_learning_rate(parse, optimizer, rate):
    assert parse(f"--optimizer={optimizer}").config.learning_rate == rate


def test_api_keras_is_passed_to_every_task(parse):
    config = parse("--api=keras", "--optimizer=adam", "--overlap").config
    assert config.api == "keras" and config.learning_rate == DEFAULT_LEARNING_RATES["adam"]
    assert config.overlap  # ElasticAverageCallback(overlap=True).
    assert "--api=keras" in config.to_flags()
    assert parse().config.api == "tf1"
    # Across a network a TF1 job sends 16 bits by default; the callback, float32 unless
    # --wire_dtype asks for its 16-bit wire.
    task = ("--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0},{W1}")
    assert parse(*task).config.wire_dtype == "bfloat16"
    assert parse(*task, "--api=keras").config.wire_dtype == "float32"
    assert parse("--api=keras", "--wire_dtype=float32").config.wire_dtype == "float32"
    keras_16 = parse(*task, "--api=keras", "--wire_dtype=bfloat16").config
    assert keras_16.wire_dtype == "bfloat16" and "--wire_dtype=bfloat16" in keras_16.to_flags()


def test_an_explicit_learning_rate_wins(parse):
    assert parse("--optimizer=adam", "--learning_rate=0.01").config.learning_rate == 0.01


def test_task_mode_from_flags(parse):
    plan = parse(
        "--job_name=worker", "--task_index=1", f"--ps_hosts={PS}", f"--worker_hosts={W0},{W1}"
    )
    assert plan.task == cluster.TaskConfig((PS,), (W0, W1), "worker", 1, source="flags")


def test_task_index_defaults_to_zero(parse):
    plan = parse("--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0}")
    assert plan.task.is_chief


@pytest.mark.parametrize(
    ("task_type", "index", "job", "task_index"),
    [("chief", 0, "worker", 0), ("worker", 0, "worker", 1), ("ps", 0, "ps", 0)],
)
def test_task_mode_from_tf_config(parse, task_type, index, job, task_index):
    plan = parse(environ={"TF_CONFIG": _tf_config(task_type, index)})
    assert (plan.task.job_name, plan.task.task_index) == (job, task_index)
    assert plan.task.worker_hosts == (W0, W1) and plan.task.source == "TF_CONFIG"


def test_flags_win_over_tf_config(parse):
    plan = parse(
        "--job_name=ps", f"--ps_hosts={PS}", f"--worker_hosts={W0}",
        environ={"TF_CONFIG": _tf_config("chief", 0)},
    )  # fmt: skip
    assert plan.task.source == "flags" and plan.task.is_ps


def test_explicit_local_mode_ignores_tf_config(parse):
    assert parse("--cluster=local", environ={"TF_CONFIG": _tf_config("chief", 0)}).task is None


def test_a_parameter_server_does_not_need_the_dataset(parse):
    # The ps machine of a real job may not have the file: only workers read it.
    plan = parse("--job_name=ps", f"--ps_hosts={PS}", f"--worker_hosts={W0}", "--dataset=/no.npz")
    assert plan.task.is_ps


def test_train_config_round_trips_through_its_flags(parse):
    config = parse("--optimizer=nesterov", "--moving_rate=0.2", "--synchronous", "--rho=0.5").config
    config = TrainConfig(**{**config.__dict__, "model_dir": "/tmp/x"})
    assert parse(*config.to_flags()).config == config


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers=0"], "flag --workers=0: 0 is not a positive integer"),
        (["--ps=-1"], "flag --ps=-1: -1 is not a positive integer"),
        (["--steps=0"], "flag --steps=0"),
        (["--batch_size=abc"], "flag --batch_size=abc"),
        (["--communication_period=0"], "flag --communication_period=0"),
        (["--optimizer=lbfgs"], "flag --optimizer=lbfgs: value should be one of"),
        (["--model=rnn"], "flag --model=rnn: value should be one of <mlp|cnn>"),
        (["--timeout_secs=0"], "flag --timeout_secs=0"),
        (["--job_name=chief"], "flag --job_name=chief"),
        (["--task_index=-1"], "flag --task_index=-1"),
        (["--max_restarts=-1"], "flag --max_restarts=-1"),
        (["--cluster=yarn"], "flag --cluster=yarn: value should be one of <local|task>"),
        (["--save_checkpoint_steps=0"], "flag --save_checkpoint_steps=0"),
        (["--log_every_steps=0"], "flag --log_every_steps=0"),
        (["--eval_every_steps=-1"], "flag --eval_every_steps=-1"),
        (["--progress_format=xml"], "flag --progress_format=xml: value should be one of"),
        (["--synchronous=maybe"], "flag --synchronous=maybe"),
        (["--seed=1.5"], "flag --seed=1.5"),
        (["--learning_rate=fast"], "flag --learning_rate=fast"),
        (["--moving_rate=x"], "flag --moving_rate=x"),
        (["--bogus=1"], "Unknown command line flag 'bogus'"),
    ],
)
def test_malformed_flags_are_rejected_by_the_parser(parse, args, message):
    with pytest.raises(flags.Error, match=re.escape(message)):
        parse(*args)


@pytest.mark.parametrize(
    ("args", "environ", "message"),
    [
        (["--learning_rate=-0.1"], {}, "--learning_rate=-0.1: must be > 0"),
        (["--learning_rate=0"], {}, "--learning_rate=0.0: must be > 0"),
        (["--moving_rate=1.5"], {}, "--moving_rate=1.5: must be in (0, 1]"),
        (["--moving_rate=0"], {}, "--moving_rate=0.0: must be in (0, 1]"),
        (["--rho=-1"], {}, "--rho=-1.0: must be >= 0"),
        (["--rho=nan"], {}, "--rho=nan: must be >= 0"),
        (["--timeout_secs=inf"], {}, "--timeout_secs=inf: must be a finite number"),
        (["--stall_report_secs=0"], {}, "--stall_report_secs=0.0: must be a number > 0"),
        (["--stall_report_secs=nan"], {}, "--stall_report_secs=nan: must be a number > 0"),
        (["--job_name=worker", "--ps_hosts=localhost", f"--worker_hosts={W0}"], {},
         "--ps_hosts='localhost': address 'localhost' is not of the form host:port"),
        (["--job_name=worker", f"--ps_hosts={PS}", "--worker_hosts=a:1,,b:2"], {},
         "--worker_hosts='a:1,,b:2': address '' is not of the form host:port"),
        (["--job_name=worker", f"--ps_hosts={PS}"], {},
         "--job_name=worker needs --worker_hosts as well"),
        (["--job_name=worker", "--task_index=2", f"--ps_hosts={PS}", f"--worker_hosts={W0},{W1}"],
         {}, "--task_index=2: job 'worker' has 2 task(s) in --worker_hosts"),
        ([f"--ps_hosts={PS}"], {}, f"--ps_hosts='{PS}' is given without --job_name"),
        (["--cluster=local", "--job_name=worker"], {},
         "--job_name='worker' describes one task of a multi-machine job; it cannot be "
         "combined with --cluster=local"),
        (["--cluster=task"], {}, "--cluster=task needs --job_name, --task_index, --ps_hosts "
         "and --worker_hosts, or the TF_CONFIG environment variable; neither is set"),
        (["--workers=3", "--job_name=worker", f"--ps_hosts={PS}", f"--worker_hosts={W0}"], {},
         "--workers=3 applies to --cluster=local only"),
        (["--max_restarts=2", "--job_name=ps", f"--ps_hosts={PS}", f"--worker_hosts={W0}"], {},
         "--max_restarts=2 applies to --cluster=local only; in task mode the cluster comes "
         "from --ps_hosts/--worker_hosts or TF_CONFIG, and whoever starts the tasks restarts "
         "them"),
        ([], {"TF_CONFIG": "{bad"}, "TF_CONFIG='{bad' is not valid JSON"),
        ([], {"TF_CONFIG": _tf_config("evaluator", 0)}, "TF_CONFIG task.type='evaluator'"),
        ([], {"TF_CONFIG": _tf_config("worker", 1)}, "TF_CONFIG task.index=1"),
        (["--dataset=/no/such.npz"], {},
         "--dataset='/no/such.npz': Dataset '/no/such.npz' does not exist"),
        (["--api=keras", "--rho=0.1"], {}, "--rho=0.1 applies to --api=tf1 only"),
        (["--api=keras", "--synchronous"], {}, "--synchronous=True applies to --api=tf1 only: "
         "ElasticAverageCallback has no elastic penalty and no start-up barrier."),
    ],
)  # fmt: skip
def test_invalid_values_name_the_flag_and_the_value(parse, args, environ, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse(*args, environ=environ)


def test_a_model_dir_that_is_a_file_is_rejected(parse, tmp_path):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(UsageError, match=f"--model_dir='{path}' exists and is not a dir"):
        parse(f"--model_dir={path}")


def test_a_malformed_dataset_is_rejected_before_anything_starts(parse, tmp_path):
    path = tmp_path / "broken.npz"
    path.write_bytes(b"junk")
    with pytest.raises(UsageError, match=f"--dataset='{path}': .* not a readable .npz"):
        parse(f"--dataset={path}")


@pytest.mark.parametrize("spelling", ["--help", "-h", "-?", "--helpshort", "--helpfull"])
def test_every_help_flag_exits_0(parse, spelling, capsys):
    del parse  # Used for its clean-up of the flags.
    # The help flags, as app.run defines them before it parses the flags. Not through
    # app.define_help_flags(), which defines them once per process: the parse fixture's
    # flagsaver removes them again after each test.
    for flag in (app.HelpFlag(), app.HelpshortFlag(), app.HelpfullFlag(), app.HelpXMLFlag()):
        if flag.name not in train.FLAGS:
            flags.DEFINE_flag(flag, train.FLAGS)
    with pytest.raises(SystemExit) as caught:
        train.parse_flags(["easgd-train", "--steps=5", spelling])
    assert caught.value.code == 0
    assert "--helpfull" in capsys.readouterr().out  # The help, on stdout.


def test_a_bad_flag_exits_with_code_2(parse, capsys):
    del parse  # Used for its clean-up of the flags.
    with pytest.raises(SystemExit) as caught:
        train.parse_flags(["easgd-train", "--workers=0"])
    assert caught.value.code == 2
    assert "easgd-train: error: flag --workers=0: 0 is not a positive integer" in (
        capsys.readouterr().err
    )
