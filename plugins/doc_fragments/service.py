# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The TARN service's options: the `tarn submit` flags, snake_case (module_utils/common.py
    # SERVICE_OPTIONS is the argument spec; tests/unit/plugins check that the two agree).
    # Options left out are flags left out: the CLI's default applies.
    DOCUMENTATION = r"""
options:
  model_repository:
    description:
      - "Triton model repository: C(hdfs:///path) (staged into each container) or an absolute C(/path) (an HDFS NFS gateway mount on every NodeManager)."
      - Required with O(state=present) and O(state=started).
    type: str
  image:
    description:
      - Triton Docker image (C(--runtime docker)); required with the Docker runtime.
    type: str
  runtime:
    description:
      - "C(docker) (production) or C(process) (C(tritonserver) installed on the NodeManagers)."
      - CLI default C(docker).
    type: str
    choices: [docker, process]
  python:
    description:
      - Interpreter that runs the launcher and the controller in the containers. CLI default C(python3).
    type: str
  queue:
    description:
      - YARN queue. CLI default C(default).
    type: str
  lifetime:
    description:
      - Seconds before YARN stops the service; unlimited when left out.
      - Not compared with the running service (the RM reports the time left).
    type: int
  port:
    description:
      - Triton HTTP port. CLI default C(8000).
    type: int
  grpc_port:
    description:
      - Triton gRPC port. CLI default C(8001).
    type: int
  metrics_port:
    description:
      - Triton metrics port. CLI default C(8002).
    type: int
  am_port:
    description:
      - The controller's API port. CLI default C(8888).
    type: int
  address:
    description:
      - Bind address. CLI default C(0.0.0.0).
    type: str
  token:
    description:
      - API token of the controller, sent as C(X-TARN-Token). Uploaded to a private HDFS file, never put in the service spec.
      - Also used to drain instances during a rolling upgrade.
    type: str
  token_file:
    description:
      - A local file holding the API token (instead of O(token)).
    type: path
  tp:
    description:
      - Tensor parallelism (GPUs per instance = tp x pp). CLI default C(1).
    type: int
  pp:
    description:
      - Pipeline parallelism. CLI default C(1).
    type: int
  gpus_per_instance:
    description:
      - "C(yarn.io/gpu) per Triton instance, C(0) for CPU only. Default tp x pp."
    type: int
  memory_mb:
    description:
      - Memory of each Triton container, MiB. CLI default C(4096).
    type: int
  vcores:
    description:
      - vcores of each Triton container. CLI default C(2).
    type: int
  controller_memory_mb:
    description:
      - Memory of the controller's container, MiB. CLI default C(1024).
    type: int
  controller_vcores:
    description:
      - vcores of the controller's container. CLI default C(1).
    type: int
  secrets:
    description:
      - "JCEKS keystore, C(hdfs:///path) or C(/path): C(huggingface.token) and C(tarn.env.*) become Triton's environment."
    type: str
  env:
    description:
      - Environment of the Triton processes (the CLI's repeated C(--env KEY=VALUE)).
    type: dict
  placement_tag:
    description:
      - Name of the anti-affinity constraint. CLI default C(nvidia).
    type: str
  anti_affinity:
    description:
      - One Triton instance per node. CLI default C(true); C(false) needs O(port_stride).
    type: bool
  port_stride:
    description:
      - Port offset per instance when instances share a node. CLI default C(0).
    type: int
  scale_up:
    description:
      - Load above which the controller adds an instance. CLI default C(0.8).
    type: float
  scale_down:
    description:
      - Load below which the controller removes one. CLI default C(0.2).
    type: float
  min_instances:
    description:
      - Fewest Triton instances (also the count a new service starts with). CLI default C(1).
    type: int
  max_instances:
    description:
      - Most Triton instances. CLI default C(4).
    type: int
  cooldown:
    description:
      - Milliseconds between two scaling actions. CLI default C(60000).
    type: int
  tick_seconds:
    description:
      - The controller's loop period, seconds. CLI default C(2).
    type: float
  concurrency_per_instance:
    description:
      - Requests in flight per instance that count as full load. CLI default C(4).
    type: float
  drain_timeout:
    description:
      - Seconds the controller waits for a draining instance's requests to finish. CLI default C(30).
    type: int
  zk_ensemble:
    description:
      - ZooKeeper C(host:port[,host:port...]) the controller registers instances in.
    type: str
  zk_path:
    description:
      - ZooKeeper path of the instances. CLI default C(/services/triton/instances).
    type: str
  ranger_service:
    description:
      - Apache Ranger service whose policies authorize requests.
    type: str
  ranger_app_id:
    description:
      - Ranger application id. CLI default C(tarn).
    type: str
  ranger_audit:
    description:
      - Send audit events to Ranger. CLI default C(false) (or C($RANGER_AUDIT)).
    type: bool
  docker_network:
    description:
      - Docker network. CLI default C(host).
    type: str
  docker_privileged:
    description:
      - Run the Triton containers privileged. CLI default C(false).
    type: bool
  docker_delayed_removal:
    description:
      - Keep stopped containers for debugging. CLI default C(false).
    type: bool
  docker_mounts:
    description:
      - Docker mounts C(/src:/dst[:ro|rw]).
    type: list
    elements: str
  docker_ports:
    description:
      - Docker port mappings C([host:]container), bridge networks only.
    type: list
    elements: str
  secrets_password:
    description:
      - Password of the O(secrets) keystore when it is not Hadoop's default C(none) (the CLI reads C($HADOOP_CREDSTORE_PASSWORD)).
    type: str
"""
