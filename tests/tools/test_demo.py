"""The pieces ``onceover demo`` is built from, on their own. The demo as a user runs it
(every story on the API, in BigQuery and on every page, then Ctrl-C):
tests/browser/test_demo.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from onceover_backend.services.webhooks.signing import headers, new_secret
from onceover_tools.demo.progress import DemoStepError, Steps
from onceover_tools.demo.receiver import WebhookReceiver
from onceover_tools.demo.waiting import poll

from onceover.errors import OnceoverError


def test_the_receiver_keeps_each_delivery_and_checks_its_signature() -> None:
    secret = new_secret()
    body = '{"status": "firing"}'
    with WebhookReceiver() as receiver:
        signed = httpx.post(receiver.url, content=body, headers=headers(secret, "msg_1", 1, body))
        forged = httpx.post(
            receiver.url, content=body, headers=headers(new_secret(), "msg_2", 1, body)
        )
        assert (signed.status_code, forged.status_code) == (200, 200)
        received = receiver.received
    assert [d.body for d in received] == [body, body]
    assert [d.signed_with(secret) for d in received] == [True, False]


def test_a_failing_step_names_itself_and_the_logs(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        steps = Steps(3, tmp_path / "logs", out=stream)
        with steps.step("First") as step:
            step.done("fine")
        with pytest.raises(DemoStepError) as failed, steps.step("Second"):
            raise OnceoverError("the thing broke\nmore detail")
    assert out.read_text() == "[1/3] First ... fine\n[2/3] Second ... failed\n"
    assert str(failed.value) == (
        f"demo step 2/3 (Second) failed: the thing broke (logs in {tmp_path / 'logs'})"
    )


def test_poll_returns_the_value_gives_up_at_the_deadline_and_stops_on_ctrl_c() -> None:
    values = iter([None, None, 7])
    assert poll("a value", lambda: next(values), 10, threading.Event()) == 7

    started = time.monotonic()
    with pytest.raises(OnceoverError, match="never did not happen within 0 s"):
        poll("never", lambda: None, 0.3, threading.Event())
    assert time.monotonic() - started >= 0.3

    stop = threading.Event()
    stop.set()
    with pytest.raises(KeyboardInterrupt):
        poll("anything", lambda: None, 10, stop)
