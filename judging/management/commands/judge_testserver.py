"""Serve the scripted OpenAI-compatible test endpoint, so the demo can run LLM judges."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from judging.testserver import Rules, TestServer
from llm.models import JudgeConfig
from llm.services import judge_config_create, judge_config_update


class Command(BaseCommand):
    help = (
        "Run a local OpenAI-compatible server with deterministic scripted answers "
        "(judging.testserver) until interrupted; optionally point a judge config at it."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
        parser.add_argument("--error-rate", type=float, default=0.0, help="share of 500s")
        parser.add_argument("--garbage-rate", type=float, default=0.0, help="unparseable share")
        parser.add_argument("--position-bias", type=float, default=0.0)
        parser.add_argument("--rule", choices=["longer", "hash"], default="longer")
        parser.add_argument(
            "--config",
            default="",
            help="create or update a JudgeConfig with this name pointing at the server",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        rules = Rules(
            latency=opts["latency"],
            error_rate=opts["error_rate"],
            garbage_rate=opts["garbage_rate"],
            position_bias=opts["position_bias"],
            pairwise_rule=opts["rule"],
        )
        server = TestServer(rules, host=opts["host"], port=opts["port"]).start()
        self.stdout.write(f"scripted judge endpoint at {server.base_url} (model 'scripted')")
        if opts["config"]:
            # The administrator's judge (no study): every study's team may use it.
            fields = {
                "base_url": server.base_url,
                "model": "scripted",
                # a brought endpoint without a key: the scripted server needs none
                "api_key_env": "",
                "provider": "",
                "disabled_reason": "",
                "parameters": {"temperature": 0},
                "concurrency": 8,
                "max_attempts": 4,
                "backoff_seconds": 0.2,
            }
            # Through the services, so the server's audit log records the judge.
            config = JudgeConfig.objects.filter(name=opts["config"], study=None).first()
            created = config is None
            if config is None:
                config = judge_config_create(name=opts["config"], **fields)
            else:
                config = judge_config_update(config=config, **fields)
            verb = "created" if created else "updated"
            self.stdout.write(f"judge config {config.name!r} {verb}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
            self.stdout.write(f"served {server.requests} requests")
