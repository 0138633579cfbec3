# The lab's connection to its podman nodes: containers.podman.podman, made cheap per task.
# A podman command costs 0.1-0.5 s here (the CLI opens podman's storage and locks each time) and
# the stock plugin runs 5-10 of them per task: no pipelining means a temporary directory, a copy,
# a chmod, the module and a clean-up, each a `podman exec`. This plugin pipes modules and, as
# root on this machine, enters the node's namespaces directly (nsenter, about 10 ms) instead of
# `podman exec`; files still go through the node's mounted root, as the stock plugin does.
# Lab and Molecule only: production clusters are reached over SSH.
from __future__ import annotations

import os
import shlex
import subprocess

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
    name: podman_lab
    short_description: containers.podman.podman with pipelining and nsenter
    description:
        - The lab's nodes (podman containers on this machine), reached as containers.podman.podman
          reaches them, with modules piped into the node and, as root, commands run through
          nsenter in the node's namespaces rather than through C(podman exec).
    options:
      remote_addr:
        description: The container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
      remote_user:
        description: The user in the container (any user but root goes through C(podman exec)).
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        vars:
          - name: ansible_podman_extra_args
      podman_executable:
        description: Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
      pipelining:
        description: Pipe modules into the node instead of copying them there.
        default: true
        type: boolean
        vars:
          - name: ansible_pipelining
"""

# What `podman exec` gives a command in these nodes: an empty environment but for these.
NODE_ENVIRONMENT = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "container": "podman",
}


class Connection(PodmanConnection):  # type: ignore[misc]  # the podman collection is untyped
    transport = "podman_lab"
    has_pipelining = True

    def _connect(self) -> Connection:
        super()._connect()  # `podman mount`: the node's root on this machine, for files
        self._pid: str | None = None
        if os.geteuid() == 0 and not self.user:
            rc, out, err = self._podman("inspect", ["--format", "{{.State.Pid}}"])
            if rc != 0 or not out.strip().isdigit():
                raise AnsibleError(f"podman inspect {self._container_id}: {to_native(err).strip()}")
            self._pid = out.strip().decode()
        return self

    @ensure_connect  # type: ignore[untyped-decorator]  # ansible is untyped
    def exec_command(
        self, cmd: str, in_data: bytes | None = None, sudoable: bool = False
    ) -> tuple[int, bytes, bytes]:
        if self._pid is None:  # another user: podman exec, with stdin when a module is piped
            if in_data is None:
                result: tuple[int, bytes, bytes] = super().exec_command(
                    cmd, in_data=in_data, sudoable=sudoable
                )
                return result
            args = ["exec", "-i", "--user", self.user]
            piped: tuple[int, bytes, bytes] = self._podman(args, shlex.split(to_native(cmd)), in_data)
            return piped
        environment = [f"{key}={value}" for key, value in NODE_ENVIRONMENT.items()]
        argv = ["nsenter", "--target", self._pid, "--all", "--root", "--wd", "--", "env", "-i", *environment]
        argv += shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        process = subprocess.run(
            [to_bytes(arg, errors="surrogate_or_strict") for arg in argv],
            input=in_data,
            stdin=None if in_data is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return process.returncode, process.stdout, process.stderr
