#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/ from real samples: SSE streams and replies in
the shapes vlmmock, SGLang and vLLM send, the repository's images shrunk to a few KiB, option
lines from the README. Seeds are committed; run this again only to change them.

Usage: make_seeds.py [SSE_CAPTURE [SHRINK [METRICS]]]: a stream captured from vlmmock, the image
helper described in image_seeds (without it, only the images already small are taken), and
vlmmock's /metrics text."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus")


def chunk(content=None, role=False, finish=None, usage=None, choices=True):
    delta = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    import json
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    obj["choices"] = ([{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [])
    if usage:
        obj["usage"] = usage
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def streams():
    ok = (chunk("Hel", role=True) + chunk("lo") + chunk(finish="stop") +
          chunk(choices=False, usage={"prompt_tokens": 3, "completion_tokens": 2}) +
          "data: [DONE]\n\n")
    yield "ok", ok
    yield "crlf", ok.replace("\n", "\r\n")
    yield "cr", ok.replace("\n", "\r")
    yield "comments", ": keep-alive\n\nevent: message\nid: 1\nretry: 10\n" + ok
    yield "multiline", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"
    yield "truncated", ok[: len(ok) // 2]
    yield "no_done", chunk("a", role=True) + chunk("b")
    yield "malformed", "data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n" + "data: [DONE]\n\n"
    yield "error", "data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\ndata: [DONE]\n\n"
    yield "reasoning", ("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n" +
                        chunk("ans") + "data: [DONE]\n\n")
    yield "empty_data", "data\n\ndata:\n\ndata: \n\n:\n\ndata:[DONE]\n\n"
    yield "near_miss", "dat: x\ndatax: y\ndata : z\nDATA: w\n\ndata: [DONE]\n\n"


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def sse_seeds(capture):
    for name, text in streams():
        body = text.encode()
        # [mode][data stop index][event stop][cuts]: mode 1 = one cut, in the middle; data stop
        # index 7 = never.
        write("sse", name, bytes([1, 7, 0]) + struct.pack(">H", len(body) // 2) + body)
    write("sse", "bytewise", bytes([4, 6, 0]) + list(streams())[0][1].encode()[:300])
    write("sse", "data_stop", bytes([2, 3, 2]) + struct.pack(">HH", 5, 40) +
          list(streams())[0][1].encode())
    if capture:
        with open(capture, "rb") as f:
            body = f.read()
        write("sse", "vlmmock", bytes([3, 7, 0]) + struct.pack(">HHH", 10, 200, 401) + body)


def response_seeds(capture):
    import json
    plain = json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "tok tok"},
         "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
        separators=(",", ":")).encode()
    err = b'{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":400}}'
    # [flags][status][result][limit][ncuts][cuts][body]; flags: 1 stream, 2 itl histogram,
    # 8 status mod 600, 16 SGLang's native replies. Result index 0 = CURLE_OK.
    def seed(name, flags, status, body, result=0, limit=4, cuts=()):
        head = bytes([flags]) + struct.pack(">H", status) + bytes([result, limit, len(cuts)])
        head += b"".join(struct.pack(">H", c) for c in cuts)
        write("response", name, head + body)
    seed("json_ok", 0, 200, plain, cuts=(7,))
    seed("json_reasoning", 0, 200, plain.replace(b'"content"', b'"reasoning_content"'))
    seed("json_error_200", 0, 200, err)
    seed("json_400", 0, 400, err)
    seed("json_429", 0, 429, err)
    seed("json_503", 0, 503, b"Service Unavailable")
    seed("json_oversize", 0, 200, plain * 40, limit=0)
    seed("json_truncated", 0, 200, plain[:30], result=6)
    seed("json_reset", 0, 0, b"", result=7)
    seed("json_timeout", 0, 200, plain[:10], result=3)
    seed("json_302", 0, 302, b"")
    for name, text in streams():
        body = text.encode()
        seed("sse_" + name, 3, 200, body, cuts=(len(body) // 3, 2 * len(body) // 3))
    seed("sse_500", 1, 500, err)
    seed("text_404", 0, 404, b"404: Not Found")
    seed("html_502", 1, 502, b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>"
         b"<!-- x --><script>a<b</script><h1>502 &amp; Bad</h1></body></html>", cuts=(9, 30))
    seed("sse_done_only", 3, 200, b": keep-alive\n\ndata: [DONE]\n\n")
    dup = b',"usage":{"completion_tokens":8},"usage":{"completion_tokens":100}}'
    seed("json_dup_usage", 0, 200, plain[:-1] + dup)
    seed("sse_dup_usage", 3, 200, b'data: {"choices":[{"delta":{"content":"a"}}]' + dup +
         b"\n\ndata: [DONE]\n\n", cuts=(20,))
    seed("sse_large_event", 1, 200, b'data: {"choices":[{"delta":{"content":"' + b"x" * 70000 +
         b'"}}]}\r\ndata: \n\ndata: [DONE]\n\n', limit=4, cuts=(5000, 65000))
    seed("sse_partial", 3, 200, list(streams())[0][1].encode(), result=8, cuts=(50,))
    if capture:
        with open(capture, "rb") as f:
            seed("sse_vlmmock", 3, 200, f.read(), cuts=(100, 400))
    for name, body in native_replies():
        seed(name, 16 | (3 if name.startswith("native_sse") else 0), 200, body.encode(),
             cuts=(len(body) // 3,))


def native_replies():
    """SGLang's /generate replies: a whole one, and streams of the text so far with meta_info."""
    import json

    def meta(k, finish=None):
        return {"id": "r1", "finish_reason": finish, "prompt_tokens": 300, "completion_tokens": k,
                "cached_tokens": 0}

    def event(text, k, finish=None):
        return "data: " + json.dumps({"text": text, "meta_info": meta(k, finish)},
                                     separators=(",", ":")) + "\n\n"
    whole = json.dumps({"text": "tok tok", "meta_info": meta(2, {"type": "length", "length": 2})},
                       separators=(",", ":"))
    yield "native_json_ok", whole
    yield "native_json_list", "[" + whole + "]"
    ok = (event("", 1) + event("tok ", 2) + event("tok ", 2) + event("tok tok ", 3) +
          event("tok tok tok ", 4, {"type": "stop", "matched": 2}) + "data: [DONE]\n\n")
    yield "native_sse_ok", ok
    yield "native_sse_truncated", ok[: len(ok) // 2]
    yield "native_sse_error", ("data: {\"error\":{\"message\":\"bad image\"}}\n\n"
                               "data: [DONE]\n\n")


def jpeg_app1(data):
    """The first APP1 (Exif) segment of a JPEG, or b""."""
    off = 2
    while off + 4 <= len(data) and data[off] == 0xFF:
        m, n = data[off + 1], struct.unpack(">H", data[off + 2:off + 4])[0]
        if m == 0xE1:
            return data[off:off + 2 + n]
        if m == 0xDA:
            break
        off += 2 + n
    return b""


def image_seeds(shrink):
    """The repository's images, re-encoded at most 40 pixels on a side by SHRINK (a helper that
    decodes, resizes and encodes with vlmload's own codec, keeping format, channels, progressive
    and Adam7; Exif is copied over), plus PNG colour types the encoder does not write."""
    src = os.path.join(ROOT, "corpus")
    for dirpath, _, files in os.walk(src):
        for fn in sorted(files):
            path = os.path.join(dirpath, fn)
            with open(path, "rb") as f:
                data = f.read()
            if data[:8] != b"\x89PNG\r\n\x1a\n" and data[:3] != b"\xff\xd8\xff":
                continue
            if len(data) <= 4096 or not shrink:
                if len(data) <= 4096:
                    write("image", fn, data)
                continue
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "o")
                subprocess.run([shrink, path, out, "40"], check=True)
                with open(out, "rb") as f:
                    small = f.read()
            app1 = jpeg_app1(data) if data[:2] == b"\xff\xd8" else b""
            if app1:
                small = small[:2] + app1 + small[2:]
            write("image", fn, small)
    for name, data in small_pngs():
        write("image", name, data)


def small_pngs():
    import zlib

    def png(w, h, ctype, depth, rows, interlace=0, extra=b""):
        def chunk(t, d):
            c = struct.pack(">I", len(d)) + t + d
            return c + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
        ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    w, h = 8, 6
    yield "rgb8.png", png(w, h, 2, 8, b"".join(b"\0" + bytes(range(3 * w)) for _ in range(h)))
    yield "rgba8.png", png(w, h, 6, 8, b"".join(b"\1" + bytes(range(4 * w)) for _ in range(h)))
    yield "gray1.png", png(w, h, 0, 1, b"".join(b"\0\xa5" for _ in range(h)))
    yield "gray16.png", png(w, h, 0, 16, b"".join(b"\2" + bytes(2 * w) for _ in range(h)))
    plte = struct.pack(">I", 6) + b"PLTE" + b"\xff\0\0\0\xff\0"
    plte += struct.pack(">I", zlib.crc32(b"PLTE\xff\0\0\0\xff\0") & 0xffffffff)
    trns = struct.pack(">I", 1) + b"tRNS" + b"\x80"
    trns += struct.pack(">I", zlib.crc32(b"tRNS\x80") & 0xffffffff)
    yield "palette_trns.png", png(w, h, 3, 1, b"".join(b"\0\x55" for _ in range(h)),
                                  extra=plte + trns)
    yield "gray_alpha.png", png(w, h, 4, 8, b"".join(b"\0" + bytes(2 * w) for _ in range(h)))
    yield "huge_declared.png", png(100000, 100000, 2, 8, b"\0\0\0\0")


def unit_seeds():
    for i, s in enumerate(["0", "1", "250ms", "30s", "2m", "1h", "1.5s", "500us", "10k", "1M",
                           "2G", "64KiB", "16MiB", "1GB", "1e3", "1.5k", "1-3", "2-16",
                           "1000000000000000000", "1000000000000000001", "0.001M", "007",
                           ".5", "1e-3", "99999999999999999999", "1-", "-1", "0x10", "inf",
                           "nan", "1 ", " 1", "1.0000000000000000000001"]):
        write("units", "u%02d" % i, s.encode())


def config_seeds():
    lines = [
        "--url\nhttp://127.0.0.1:30000\n--rate\n50\n--images\ncorpus/\n--flush-every\n50\n"
        "--duration\n30m\n--timeline\ntimeline.csv",
        "--rate\n100\n--image-ratio\n0.3\n--images-per-request\n1-3\n--resolution\n"
        "224x224-1920x1080\n--image-format\nmixed\n--unique-images\n--duration\n10m",
        "--rate\n0\n--concurrency\n64\n--requests\n10k\n--output\nsummary.json",
        "--rate\n20\n--stream\n--timeline\nt.csv\n--log-requests\nr.jsonl",
        "--arrival\ngamma:2.5\n--rate\n5\n--warmup\n3\n--requests\n10",
        "--shard\n1/4\n--seed\n7\n--requests\n100",
        "--shard\nauto/4",
        "--url\nhttp://a:1\n--url\nhttp://b:2/\n--url\nhttp://a:1\n--header\nX-A: 1",
        "--api-key\nsk-xyz\n--header\nAuthorization: Bearer q",
        "--resolution\n1280x720:3,4k:1\n--image-placement\nrandom\n--max-pixels\n1M",
        "--flush-every\n30s\n--flush-mode\ninline\n--flush-endpoint\n/a,/b\n--flush-method\nGET",
        "--help",
        "--version",
        "-hV",
        "--rate=-5",
        "--concurrency\n0",
        "--duration\n5x",
        "--url\nftp://x",
        "--no-such-flag",
        "--warmup\n10\n--requests\n5",
        "--connect-timeout\n20s\n--timeout\n1s",
        "--config\nx\0{\"rate\": 50, \"stream\": true, \"header\": [\"A: 1\"], \"requests\": 10}",
        "--config=x\0{\"images-per-request\": \"2-4\", \"quiet\": true}",
        "--config\nx\0{\"nope\": 1}",
        "--config\nx\0[1,2]",
        "--sweep\nrate=10:50:10\n--requests\n100",
        "--sweep\nconcurrency=1:8:1\n--rate\n0\n--duration\n5s",
        "--config\nx\0{\"rate\": 5, \"phases\": [{\"name\": \"warm\", \"rate\": 2, \"duration\": "
        "\"10s\"}, {\"rate\": 10, \"ramp_to\": 50, \"requests\": 100}]}",
        "--sweep\nrate=1:2:1\n--config\nx\0{\"phases\": [{\"rate\": 1}]}",
    ]
    for i, s in enumerate(lines):
        write("config", "c%02d" % i, s.encode())


SGLANG_METRICS = """# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 1.2345e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 0.07
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 3.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 9.0
sglang:time_to_first_token_seconds_sum{model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 1.5
sglang:time_to_first_token_seconds_count{model_name="Qwen/Qwen2.5-VL-7B-Instruct"} 9.0
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.294967296e+09
"""

VLLM_METRICS = """# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="llava-hf/llava-1.5-7b-hf"} 0.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="llava"} 12.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="llava",} 3.0
# TYPE vllm:e2e_request_latency_seconds summary
vllm:e2e_request_latency_seconds{quantile="0.5"} NaN
vllm:e2e_request_latency_seconds_sum 7.5 1700000000000
vllm:e2e_request_latency_seconds_count 15
odd{path="C:\\DIR\\FILE.TXT",msg="a \\"quoted\\"\\nline"} -Inf
"""


def prom_seeds(metrics):
    # [flags][text]: flags 0 = exposition only, 1 = a selector line first.
    texts = {"sglang": SGLANG_METRICS, "vllm": VLLM_METRICS,
             "crlf": SGLANG_METRICS.replace("\n", "\r\n")}
    if metrics:
        with open(metrics) as f:
            texts["vlmmock"] = f.read()
    for name, text in texts.items():
        write("prom", name, b"\0" + text.encode())
    sel = ("http://127.0.0.1:30000#sglang:token_usage,"
           "vllm:request_success_total{finished_reason=~\"st.*\",engine!=\"1\"}\n")
    write("prom", "selector", b"\1" + sel.encode() + VLLM_METRICS.encode())
    write("prom", "selector_default", b"\1http://[::1]:8000\n" + SGLANG_METRICS.encode())
    write("prom", "bad_line", b"\0" + b"ok 1\nbad{a=\"1\" 2\nnever 3\n")
    write("prom", "stop", bytes([2 * 2]) + SGLANG_METRICS.encode())


def jsonscan_diff_seeds():
    """The jsonscan seeds (their 2-byte cut dropped) under each of the four policies, with a
    capture limit and a split seed, and the chat reply vlmload reads most."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "jsonscan")
    texts = [(n, open(os.path.join(here, n), "rb").read()[2:]) for n in sorted(os.listdir(here))]
    texts.append(("reply", b'{"id":"b","object":"chat.completion","model":"m","choices":[{"index":0,'
                  b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
                  b'"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}'))
    for name, text in texts:
        for policy in range(4):
            write("jsonscan_diff", "%s_%d" % (name, policy),
                  bytes([policy | 4, 20 + 7 * policy]) + struct.pack(">H", 1 + policy) + text)


def main():
    capture = sys.argv[1] if len(sys.argv) > 1 else None
    shrink = sys.argv[2] if len(sys.argv) > 2 else None
    metrics = sys.argv[3] if len(sys.argv) > 3 else None
    sse_seeds(capture)
    response_seeds(capture)
    image_seeds(shrink)
    unit_seeds()
    config_seeds()
    prom_seeds(metrics)
    jsonscan_diff_seeds()


if __name__ == "__main__":
    main()
