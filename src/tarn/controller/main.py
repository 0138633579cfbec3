"""`tarn controller`: wire the RM, ZooKeeper, the scraper, the loop and the API, then run.

Inside YARN the RM is found like any Hadoop client finds it: $HADOOP_CONF_DIR/yarn-site.xml
(the NodeManager passes HADOOP_CONF_DIR to containers), unless --rm-url is given. With
--ranger-service, Ranger's plugin settings come from --ranger-conf-dir (tarn.ranger.settings)
and a refresher keeps the policies (tarn.ranger.refresher) the API authorizes with; with
--ranger-audit, an audit writer (tarn.ranger.audit_log) sends its decisions to Ranger's destinations.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import replace

from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.spnego import rm_auth
from tarn.controller.loop import ControlLoop
from tarn.controller.observe import Scraper, application_of_container
from tarn.controller.registry import Registry
from tarn.controller.server import Api, serve
from tarn.controller.shutdown import STOP_BUDGET_S, STOP_GRACE_S, Step, StopSignal, Watchdog, run_within
from tarn.hadoop_conf import client_conf_dir, resource_manager_urls
from tarn.ranger.audit_log import AuditLog, HdfsAuditFile, Identity
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.refresher import Refresher, connect
from tarn.ranger.settings import PluginSettings, settings_of
from tarn.stdlib.api_token import read_token
from tarn.stdlib.config import TarnConfig
from tarn.stdlib.hadoop_site import hadoop_user
from tarn.stdlib.kerberos import service_identity, webhdfs_auth
from tarn.stdlib.webhdfs import Authenticator, WebHdfsClient, namenode_from_conf

log = logging.getLogger("tarn.controller")


HUNG_STATUS = 70  # EX_SOFTWARE: the exit status of a controller whose loop hung (YARN relaunches it)
RM_TIMEOUT_S = 5.0  # per ResourceManager call: a tick waits on no one RM call longer


def run_controller(config: TarnConfig, rm_urls: list[str] | None, environ: Mapping[str, str]) -> int:
    """Run until YARN's SIGTERM; the exit status (143). The caller ends the process
    (tarn.controller.shutdown.end_process): threads left behind must not hold it."""
    logging.basicConfig(
        stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = StopSignal()
    stop.install()  # first: under Docker a PID 1 without a handler never sees YARN's SIGTERM
    user = hadoop_user(config.user, environ) or "tarn"  # outside YARN only: the NodeManager sets $USER
    rm_at = resource_manager_urls(rm_urls, client_conf_dir(None, environ))
    ranger = settings_of(config)  # ConfigError before anything starts
    # no retries within a tick: the loop already treats an unreadable service as "try next tick"
    identity = service_identity(config.service_principal, config.service_keytab)  # a secure cluster
    rm = ResourceManager(
        rm_at, user=user, timeout=RM_TIMEOUT_S, service_get_retries=(), auth=rm_auth(identity)
    )
    registry = None
    if config.zk_ensemble:
        # a secure cluster: SASL (Kerberos) as the service, znodes only it may change
        registry = Registry(config.zk_ensemble, config.zk_path, config.service_name, identity=identity)
        registry.start()
        log.info("ZooKeeper %s: registering under %s", config.zk_ensemble, config.zk_path)
    else:
        log.warning("no --zk-ensemble: instances are listed by /instances only")
    token = read_token(config.token, config.token_file)
    scraper = Scraper(timeout=min(1.0, config.tick_seconds / 2), token=token)
    application = application_of_container(environ.get("CONTAINER_ID", ""))  # YARN sets it
    log.info("YARN application: %s", application or "unknown (not in a YARN container)")
    controller = ControlLoop(config, rm, registry, scraper, application=application)
    if registry is not None:
        registry.watch_demand(controller.note_demand)
    refresher = None if ranger is None else start_ranger(ranger)
    hdfs_auth = webhdfs_auth(identity, user)
    audit = None if ranger is None or not ranger.audit.on else start_audit(ranger, hdfs_auth, environ)
    authorizer = None if refresher is None else Authorizer(lambda: refresher.state, audit=audit)
    api = Api(controller, token, authorizer)
    if api.token is None:
        log.warning("no --token: the API answers anyone who can reach it")
    server = serve(api, config.address, config.am_port)
    log.info("serving on %s:%d, tick %.1f s", config.address, config.am_port, config.tick_seconds)

    # The loop runs in a thread of its own so that a stop never waits on a tick under way: when YARN
    # stops the service it stops the AM too, and an RM call about the service then waits on the
    # dying AM until RM_TIMEOUT_S, call after call, past the NodeManager's SIGKILL.
    loop = threading.Thread(target=controller.run, args=(stop.event,), name="control-loop", daemon=True)
    loop.start()
    stop.running(controller.wake)
    watchdog, hung = Watchdog.for_tick(config.tick_seconds), False
    try:
        while loop.is_alive() and not stop.event.wait(1.0):
            if watchdog.stalled(controller.published):
                hung = True
                log.error(
                    "the control loop has published nothing for %d checks (a hung tick): ending the "
                    "process so that YARN relaunches the controller",
                    watchdog.quiet,
                )
                break
    finally:
        steps = [
            Step("the tick under way", lambda left: loop.join(min(STOP_GRACE_S, left))),
            Step("the API", lambda left: server.shutdown()),
            Step("the scraper", lambda left: scraper.close()),
        ]
        if refresher is not None:  # a poll under way is abandoned: the policies are not needed now
            steps.append(Step("the Ranger poll", lambda left: refresher.stop(0.0)))
        if audit is not None:
            steps.append(Step("the Ranger audit's last write", audit.stop))
        for late in run_within(steps, STOP_BUDGET_S):
            log.warning("stopping with %s still under way after %.0f s (left behind)", late, STOP_BUDGET_S)
        if registry is not None:
            left = registry.detach()
            log.info("leaving %d registrations in ZooKeeper for a successor to adopt", left)
        log.info("stopped")
    if hung:
        return HUNG_STATUS  # end_process exits at once: the hung tick's threads must not hold it
    if not stop.event.is_set():
        raise RuntimeError("the control loop ended by itself")
    # 128+N when YARN stopped it, as the launcher reports a stop (tarn.stdlib.launcher.supervise)
    return stop.status


def start_ranger(settings: PluginSettings) -> Refresher:
    """The Ranger plugin: the cache read, then Admin polled in the background."""
    for note in settings.notes:
        log.warning("Ranger: %s", note)
    refresher = connect(settings)
    refresher.start()
    log.info(
        "Ranger service %s: polling %s every %.1f s, cache %s",
        settings.service,
        ", ".join(settings.rest_urls),
        settings.poll_interval_s,
        settings.cache_dir or "off",
    )
    return refresher


def start_audit(settings: PluginSettings, hdfs_auth: Authenticator, environ: Mapping[str, str]) -> AuditLog:
    """The audit writer for ranger-triton-audit.xml's destinations; HDFS through WebHDFS, found as
    the launcher finds it ($HADOOP_CONF_DIR), as the controller's identity (``hdfs_auth``)."""
    host = socket.gethostname()
    hdfs = None
    if settings.audit.hdfs is not None:
        namenode, folder = namenode_from_conf(settings.audit.hdfs.dir, client_conf_dir(None, environ))
        client = WebHdfsClient(namenode, hdfs_auth, timeout=10.0, retries=1)
        destination = replace(settings.audit.hdfs, dir=folder.rstrip("/"))
        hdfs = HdfsAuditFile(client, destination, settings.app_id, host)
    identity = Identity(settings.service, settings.app_id, host, settings.cluster_name)
    audit = AuditLog(settings.audit, identity, hdfs)
    audit.start()
    log.info(
        "Ranger audit: to %s",
        " and ".join(
            ([f"HDFS {settings.audit.hdfs.dir}"] if settings.audit.hdfs else [])
            + ([f"logger {settings.audit.logger}"] if settings.audit.logger else [])
        ),
    )
    return audit
