"""Unit tests for the job server: tokens, tensors and bodies are checked, never trusted."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from fixed_web_platform.harness import server as server_module
from fixed_web_platform.harness.server import JobServer


async def _with_job(check, *, max_post: int | None = None):  # noqa: ANN001, ANN202
    if max_post is not None:
        server_module.MAX_POST_BYTES, saved = max_post, server_module.MAX_POST_BYTES
    try:
        async with JobServer() as server, aiohttp.ClientSession() as http:
            job = server.add_job({"runner": "wgsl", "output_bytes": 64}, {"x": b"\x01\x02\x03\x04"})
            base = f"{server.base_url}/api/jobs/{job.job_id}"
            return await check(server, job, http, base)
    finally:
        if max_post is not None:
            server_module.MAX_POST_BYTES = saved


def test_listens_on_loopback_only() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        assert server.base_url.startswith("http://127.0.0.1:")
        assert f"token={job.token}" in server.job_url(job)
    asyncio.run(_with_job(check))


@pytest.mark.parametrize("path", ["/spec", "/tensors/x"])
@pytest.mark.parametrize("token", ["", "wrong"])
def test_bad_or_missing_token_is_403(path: str, token: str) -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.get(f"{base}{path}?token={token}") as r:
            assert r.status == 403
        async with http.post(f"{base}/result?token={token}", data=b"{}") as r:
            assert r.status == 403
        assert not job.result.done()
    asyncio.run(_with_job(check))


def test_unknown_job_is_403_and_missing_tensor_is_404() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.get(f"{server.base_url}/api/jobs/nope/spec?token={job.token}") as r:
            assert r.status == 403
        async with http.get(f"{base}/tensors/w?token={job.token}") as r:
            assert r.status == 404
        async with http.get(f"{base}/tensors/x?token={job.token}") as r:
            assert r.status == 200 and await r.read() == b"\x01\x02\x03\x04"
        async with http.get(f"{base}/spec?token={job.token}") as r:
            assert (await r.json())["job_id"] == job.job_id
            assert r.headers["Cross-Origin-Embedder-Policy"] == "require-corp"
    asyncio.run(_with_job(check))


def test_unreadable_result_body_is_a_failed_reply_not_a_crash() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.post(f"{base}/result?token={job.token}", data=b"\xff{not json") as r:
            assert r.status == 200
        payload = job.result.result()
        assert payload["status"] == "failed" and "unreadable" in payload["reason"]
    asyncio.run(_with_job(check))


def test_result_that_is_not_an_object_is_failed() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.post(f"{base}/result?token={job.token}", data=json.dumps([1, 2])) as r:
            assert r.status == 200
        assert job.result.result()["status"] == "failed"
    asyncio.run(_with_job(check))


def test_oversized_body_is_refused() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.post(f"{base}/output?token={job.token}", data=b"0" * 4096) as r:
            assert r.status == 413
        assert job.output is None
    asyncio.run(_with_job(check, max_post=1024))


def test_first_result_wins() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        for status in ("ok", "failed"):
            async with http.post(f"{base}/result?token={job.token}", json={"status": status}) as r:
                assert r.status == 200
        assert job.result.result()["status"] == "ok"
    asyncio.run(_with_job(check))


def test_output_is_capped_at_what_the_job_can_send() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.post(f"{base}/output?token={job.token}", data=b"0" * 65) as r:
            assert r.status == 413
        assert job.output is None
        async with http.post(f"{base}/output?token={job.token}", data=b"0" * 64) as r:
            assert r.status == 200
        assert job.output == b"0" * 64
    asyncio.run(_with_job(check))


def test_a_non_ascii_token_is_403_not_a_traceback() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.get(f"{base}/spec", params={"token": "j\u00f6b-\u2603"}) as r:
            assert r.status == 403
    asyncio.run(_with_job(check))


def test_a_deeply_nested_result_is_a_failed_reply_not_a_traceback() -> None:
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async with http.post(f"{base}/result?token={job.token}", data="[" * 100_000 + "]" * 100_000) as r:
            assert r.status == 200
        payload = job.result.result()
        assert payload["status"] == "failed" and "RecursionError" in payload["reason"]
    asyncio.run(_with_job(check))


def test_beyond_loopback_only_when_asked_loudly_and_still_token_bound(capsys: pytest.CaptureFixture[str]) -> None:
    from fixed_web_platform.harness.server import check_serve_host

    async def main() -> None:
        async with JobServer(host="0.0.0.0") as server, aiohttp.ClientSession() as http:
            assert server.beyond_loopback
            job = server.add_job({"runner": "wgsl", "output_bytes": 4}, {})
            base = f"http://127.0.0.1:{server.port}/api/jobs/{job.job_id}"  # any interface answers
            async with http.get(f"{base}/spec?token={job.token}") as r:
                assert r.status == 200
            async with http.post(f"{base}/result", data=b'{"status": "ok"}') as r:
                assert r.status == 403
            assert not job.result.done()
            assert len(job.token) >= 22  # 16 random bytes, URL-safe: not guessable
            assert not server.base_url.startswith("http://0.0.0.0")  # a URL a node can open
    asyncio.run(main())
    assert "WARNING: the page server listens on 0.0.0.0:" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--serve-host"):
        check_serve_host("192.0.2.1")  # TEST-NET: not an address of this machine


def test_output_arrives_in_pieces_and_a_piece_sent_again_replaces_itself() -> None:
    """The page posts its output in pieces at their offsets and sends one again after a network
    error (web/job_client.js): the pieces join in order, a repeated one is not counted twice, a
    gap is refused and the whole stays within what the job can send."""
    async def check(server, job, http, base):  # noqa: ANN001, ANN202
        async def post(offset, data):  # noqa: ANN001, ANN202
            async with http.post(f"{base}/output?token={job.token}&offset={offset}", data=data) as r:
                return r.status
        assert await post(0, b"a" * 30) == 200
        assert await post(30, b"b" * 30) == 200
        assert await post(30, b"c" * 30) == 200  # sent again
        assert job.output == b"a" * 30 + b"c" * 30
        assert await post(70, b"d") == 409  # bytes 60-69 never came
        assert await post(60, b"e" * 5) == 413  # 65 bytes in all
        assert await post("x", b"") == 400
        assert await post(60, b"f" * 4) == 200
        assert job.output == b"a" * 30 + b"c" * 30 + b"ffff"
    asyncio.run(_with_job(check))
