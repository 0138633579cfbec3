"""Submit → first successful inference on the lab, twice: cold (first submission after the lab
came up) and warm (the same service destroyed and submitted again: images, jars and the OS page
cache are warm; the model cache is per application, so the models are staged again).

    python bench/submit_to_inference.py [--json PATH]     (needs the lab: make lab-site)

Cold is the baseline of warm.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from tarn.cli import instances_of
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

ROOT = Path(__file__).resolve().parents[1]
USER = "tarn"
SERVICE = "bench-submit"
DEMO = "tarn-demo"  # lab/main_job.py's service
MODELS = f"/user/{USER}/bench-models"
CLUSTER = ["--rm-url", "http://master:8088", "--webhdfs-url", "http://master:9870"]


def tarn(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "tarn", *args], check=True, capture_output=True, text=True)


def first_inference(rm: ResourceManager, timeout: float = 600) -> tuple[float, str]:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        for row in instances_of(rm.service(SERVICE) or {}):
            if row["state"] != "READY":
                continue
            client = httpclient.InferenceServerClient(url=f"{row['host']}:8000", connection_timeout=2)
            tensor = httpclient.InferInput("INPUT0", [4], "FP32")
            tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
            try:
                out = client.infer("add_one", [tensor]).as_numpy("OUTPUT0")
            except Exception:  # noqa: S112 - not serving yet: poll again
                continue
            if out is not None and out.tolist() == [1.0, 2.0, 3.0, 4.0]:
                return time.monotonic() - start, str(row["host"])
        time.sleep(0.5)
    sys.exit("no successful inference")


def run(label: str, rm: ResourceManager) -> dict[str, Any]:
    """One submission: the seconds `tarn submit` took, to the first inference, and where."""
    tarn("destroy", "--service-name", SERVICE, "--user", USER, *CLUSTER)
    start = time.monotonic()
    tarn(
        "submit", "--service-name", SERVICE, "--user", USER, "--runtime", "process",
        "--model-repository", f"hdfs://{MODELS}", "--min-instances", "1", "--max-instances", "1",
        "--memory-mb", "1024", "--vcores", "1", "--controller-memory-mb", "512", *CLUSTER,
    )  # fmt: skip
    submitted = time.monotonic() - start
    seconds, host = first_inference(rm)
    total = submitted + seconds
    print(f"{label:<6} submit {submitted:5.1f} s, first inference after {total:6.1f} s (on {host})")
    return {"submit_s": submitted, "first_inference_s": total, "host": host}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rm = ResourceManager(["http://master:8088"], user=USER)
    hdfs = WebHdfsClient("http://master:9870", SimpleAuth(USER))
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS)
    # Its instance listens on port 8000 of its host, as the main job's do (one on each worker).
    destroyed_demo = rm.service(DEMO) is not None
    if destroyed_demo:
        print(f"destroying {DEMO}: its instances hold port 8000 (`make lab-job` brings it back)", flush=True)
        tarn("destroy", "--service-name", DEMO, "--user", USER, *CLUSTER)
    try:
        cold = run("cold", rm)
        warm = run("warm", rm)
        print(f"warm / cold = {warm['first_inference_s'] / cold['first_inference_s']:.2f}")
    finally:
        tarn("destroy", "--service-name", SERVICE, "--user", USER, *CLUSTER)
        hdfs.delete(MODELS, recursive=True)
    if args.json:
        figure: Figure = {
            "name": "submit -> first inference, warm", "value": warm["first_inference_s"], "unit": "s",
            "baseline": cold["first_inference_s"], "baseline_name": "cold",
        }  # fmt: skip
        result = Result("submit_to_inference", [figure], samples={"cold": cold, "warm": warm},
                        destroyed_demo=destroyed_demo)  # fmt: skip
        result.write(args.json)


if __name__ == "__main__":
    main()
