"""`tarn controller`: wire the RM, ZooKeeper, the scraper, the loop and the API, then run.

Inside YARN the RM is found like any Hadoop client finds it: $HADOOP_CONF_DIR/yarn-site.xml
(the NodeManager passes HADOOP_CONF_DIR to containers), unless --rm-url is given.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from tarn.clients.resourcemanager import ResourceManager
from tarn.config import TarnConfig
from tarn.controller.loop import Controller
from tarn.controller.observe import Scraper
from tarn.controller.registry import Registry
from tarn.controller.server import Api, serve
from tarn.errors import ConfigError
from tarn.hadoop_conf import read_properties, rm_web_urls

log = logging.getLogger("tarn.controller")


def controller_token(config: TarnConfig) -> str | None:
    if config.token is not None:
        return config.token.reveal()
    if config.token_file is not None:
        return Path(config.token_file).read_text().strip()
    return None


def resolve_rm_urls(rm_urls: list[str] | None, environ: Mapping[str, str]) -> list[str]:
    if rm_urls:
        return rm_urls
    conf_dir = Path(environ.get("HADOOP_CONF_DIR") or "/etc/hadoop/conf")
    urls = rm_web_urls(read_properties(conf_dir / "yarn-site.xml"))
    if not urls:
        raise ConfigError(f"--rm-url: none given and none found in {conf_dir}/yarn-site.xml")
    return urls


def run_controller(config: TarnConfig, rm_urls: list[str] | None, environ: Mapping[str, str]) -> int:
    logging.basicConfig(
        stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    user = config.user or environ.get("HADOOP_USER_NAME") or environ.get("USER") or "tarn"
    rm = ResourceManager(resolve_rm_urls(rm_urls, environ), user=user, timeout=5.0)
    registry = None
    if config.zk_ensemble:
        registry = Registry(config.zk_ensemble, config.zk_path, config.service_name)
        registry.start()
        log.info("ZooKeeper %s: registering under %s", config.zk_ensemble, config.zk_path)
    else:
        log.warning("no --zk-ensemble: instances are listed by /instances only")
    scraper = Scraper(timeout=min(1.0, config.tick_seconds / 2))
    controller = Controller(config, rm, registry, scraper)
    api = Api(controller, controller_token(config))
    if api.token is None:
        log.warning("no --token: the API answers anyone who can reach it")
    server = serve(api, config.address, config.am_port)
    log.info("serving on %s:%d, tick %.1f s", config.address, config.am_port, config.tick_seconds)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        controller.run(stop)
    finally:
        server.shutdown()
        scraper.close()
        if registry is not None:
            registry.stop()  # remove our znodes now rather than at session expiry
        log.info("stopped")
    return 0
