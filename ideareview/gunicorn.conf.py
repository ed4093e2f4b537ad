"""gunicorn's configuration for `make serve` (and the systemd unit in docs/deploy.md).

Threads, not processes, carry the concurrency: a reviewer's request mostly waits on the
database. Each thread holds at most one database connection, so a server holds at most
workers x threads; `scripts/serve` checks that against PostgreSQL's max_connections.
"""

import multiprocessing
import os

bind = os.environ.get("IDEAREVIEW_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("IDEAREVIEW_WEB_WORKERS", min(2 * multiprocessing.cpu_count(), 8)))
threads = int(os.environ.get("IDEAREVIEW_WEB_THREADS", 4))
worker_class = "gthread"
# A request that takes longer is stuck, not slow: the report and imports run in Celery.
timeout = int(os.environ.get("IDEAREVIEW_WEB_TIMEOUT", 60))
graceful_timeout = 30
# An idle connection costs a socket in the worker's poller, not a thread. A reviewer who
# types saves every few seconds, and a proxy keeps its idle connections to us for up to
# a minute: closing after 5 s made most of them a new connection (and the client that
# wrote into one just closed sends its request again).
keepalive = 75
# Recycle workers now and then so a slow leak never grows without bound. A new worker
# imports the whole project again (seconds of CPU, docs/measurements.md), so "now and then"
# is counted in tens of thousands of requests: at 5,000, a server answering a thousand
# reviewers restarted one of its workers every minute or so.
max_requests = 50000
max_requests_jitter = 5000
# Off unless asked for: request lines carry invitation tokens (the proxy logs requests).
accesslog = "-" if os.environ.get("IDEAREVIEW_ACCESS_LOG") == "1" else None
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(b)s %(M)sms'
errorlog = "-"
# Behind a proxy on the same machine, X-Forwarded-* from loopback are believed.
forwarded_allow_ips = os.environ.get("IDEAREVIEW_TRUSTED_PROXIES", "127.0.0.1,::1")
# gunicorn's control socket defaults to one path per user; two servers on one machine
# (a staging beside production, a benchmark) would share it.
control_socket = os.path.join(os.environ.get("IDEAREVIEW_VAR_DIR", "var"), "gunicorn.ctl")
