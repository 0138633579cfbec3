"""HAProxy in front of the Triton instances: `tarn haproxy-sync` keeps a backend's slots equal to
the instances discovery announces (ZooKeeper or the controller's /instances).

* :mod:`tarn.haproxy.plan`: the decision, pure: current slots + wanted instances -> commands.
* :mod:`tarn.haproxy.runtime`: HAProxy's Runtime API over its Unix stats socket.
* :mod:`tarn.haproxy.sources`: where the wanted instances come from; keeps the last good set.
* :mod:`tarn.haproxy.sync`: the loop (observe, decide, act) and the command line.
"""
