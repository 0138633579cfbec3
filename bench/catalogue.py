"""Every benchmark `python -m bench` runs, in its order, declared once: the runner (bench/__main__.py)
and the report (bench/report.py) both read this table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    name: str  # build/bench/<name>.json and <name>.log
    title: str  # the report's section
    script: str  # from the repository's root
    args: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = None  # the arguments under --quick (None: the same as args)
    lab: bool = False  # needs the lab up
    demo: bool = False  # needs the main job's tarn-demo (lab/main_job.py runs first)
    programs: tuple[str, ...] = ()  # needs these on PATH

    def arguments(self, quick: bool) -> tuple[str, ...]:
        return self.quick if quick and self.quick is not None else self.args


# The main job: not a bench, the service tarn-demo that some need (run again, it reuses a running one).
LAB_JOB = Bench("lab_job", "the main job (tarn-demo)", "lab/main_job.py", lab=True)

BENCHES: tuple[Bench, ...] = (
    # first: it rebuilds the lab the others measure (about 15 minutes)
    Bench("lab_bringup", "Lab bring-up", "bench/lab_bringup.py", programs=("podman", "ansible-playbook")),
    Bench(
        "submit_to_inference",
        "Cold start: submit -> first inference",
        "bench/submit_to_inference.py",
        lab=True,
    ),
    Bench(
        "staging_lab",
        "Staging vs sequential read (the lab's HDFS)",
        "bench/staging_throughput.py",
        args=("--lab",),
        quick=("--lab", "--rounds", "1"),
        lab=True,
    ),
    # it may destroy tarn-demo for room, as submit_to_inference does (the runner brings it back)
    Bench(
        "scale_timeline",
        "Scale-up timeline: load step -> decision -> ready -> serving",
        "bench/scale_timeline.py",
        quick=("--settle", "4"),
        lab=True,
    ),
    Bench(
        "entry_overhead",
        "Entry overhead: direct, HAProxy, Knox (wrk)",
        "bench/entry_overhead.py",
        quick=("--seconds", "3", "--warmup", "3", "--rounds", "1"),
        lab=True,
        demo=True,
        programs=("wrk", "podman"),
    ),
    Bench(
        "haproxy_throughput",
        "Discovery latency: ZooKeeper -> HAProxy backend",
        "bench/haproxy_throughput.py",
        quick=("--seconds", "5", "--rounds", "3"),
        lab=True,
        demo=True,
        programs=("podman",),
    ),
    Bench(
        "controller_scale",
        "Controller tick vs instances",
        "bench/controller_scale.py",
        args=("--curve", "10,100,1000"),
        quick=("--curve", "10,30,100", "--ticks", "3"),
    ),
    Bench(
        "ranger_authorize",
        "Ranger decisions",
        "bench/ranger_authorize.py",
        quick=("--policies", "100", "--requests", "2000"),
    ),
    Bench(
        "activator",
        "Activator: overload and entry latency",
        "bench/activator.py",
        quick=("--held", "100", "--requests", "400"),
        programs=("haproxy",),
    ),
    Bench(
        "openai_routing",
        "OpenAI routing: leastconn vs round robin, time to first token",
        "bench/openai_routing.py",
        quick=("--quick",),
        # ansible-playbook renders the haproxy role's /v1 backend; the tritonserver is found as the
        # bench's docstring says
        programs=("haproxy", "ansible-playbook"),
    ),
    Bench(
        "front_http",
        "OpenAI front: its HTTP layer before and after h11, first token and streaming",
        "bench/front_http.py",
        quick=("--quick",),
        # git: the baseline front comes out of the repository's history; the tritonserver is found
        # (or its venv made) as openai_routing's, else the stand-in alone
        programs=("git",),
    ),
    Bench(
        "tenancy",
        "OpenAI front: a quiet user beside a flooder, fair admission vs first come, first served",
        "bench/tenancy.py",
        quick=("--quick",),
        # the tritonserver is found (or its venv made) as openai_routing's
    ),
    Bench(
        "staging_self_test",
        "Staging vs sequential read (loopback fake WebHDFS)",
        "bench/staging_throughput.py",
        args=("--self-test",),
        quick=("--self-test", "--files", "4", "--size-mib", "16", "--rounds", "1"),
    ),
)


def by_name(name: str) -> Bench:
    for bench in BENCHES:
        if bench.name == name:
            return bench
    raise KeyError(name)
