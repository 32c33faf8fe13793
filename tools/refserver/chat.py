"""Chat requests: the OpenAI body read into a prompt of text and decoded images, a stand-in
tokenizer, and the reply shapes (JSON, SSE chunks, errors) that vlmmock also speaks.

Nothing here imports torch, so the HTTP side and its checks run on a machine without it.
"""

import base64
import binascii
import hashlib
import io
import json
import math
import time
import zlib

# Qwen2.5-VL's special token ids (the real tokenizer's), kept so the prompt has the real layout.
PAD = 151643            # <|endoftext|>
IM_START = 151644       # <|im_start|>
IM_END = 151645         # <|im_end|>
VISION_START = 151652   # <|vision_start|>
VISION_END = 151653     # <|vision_end|>
IMAGE_TOKEN = 151655    # <|image_pad|>
VOCAB = 151936
_TEXT_IDS = 151000      # stand-in text ids fall in [100, 100 + _TEXT_IDS)


class BadRequest(Exception):
    """A request this server refuses with 400 (or the status given)."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


def text_ids(text):
    """A stand-in tokenizer: one id per 4 code points, from a CRC of the piece. No tokenizer is
    downloaded, so the ids mean nothing; the count is close to a real tokenizer's."""
    return [100 + zlib.crc32(text[i:i + 4].encode("utf-8", "surrogatepass")) % _TEXT_IDS
            for i in range(0, len(text), 4)]


_SYLLABLES = ["ka", "lo", "mi", "re", "su", "ta", "no", "vi", "de", "pa", "zu", "ne", "ho", "ri",
              "ga", "te"]


def token_text(tok):
    """The text of a generated id: a made-up word, since there is no tokenizer to decode with."""
    return _SYLLABLES[tok % 16] + _SYLLABLES[(tok >> 4) % 16] + _SYLLABLES[(tok >> 8) % 16] + " "


def smart_resize(h, w, factor=28, min_pixels=3136, max_pixels=12845056):
    """Qwen2-VL's resize rule: both sides a multiple of factor, the area within the limits, the
    aspect ratio kept. Used by the stub engine; the real engine takes the processor's grid."""
    if max(h, w) / max(1, min(h, w)) > 200:
        raise BadRequest("image aspect ratio over 200")
    hb = max(factor, round(h / factor) * factor)
    wb = max(factor, round(w / factor) * factor)
    if hb * wb > max_pixels:
        beta = math.sqrt(h * w / max_pixels)
        hb = max(factor, math.floor(h / beta / factor) * factor)
        wb = max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb = math.ceil(h * beta / factor) * factor
        wb = math.ceil(w * beta / factor) * factor
    return hb, wb


class Image:
    """One decoded image of a request."""

    __slots__ = ("pil", "width", "height", "fmt", "nbytes", "key", "grid", "pixel_values")

    def __init__(self, pil, fmt, nbytes, key):
        self.pil = pil
        self.width, self.height = pil.size
        self.fmt = fmt
        self.nbytes = nbytes
        self.key = key            # content hash of the decoded pixels (mm cache key), or None
        self.grid = None          # (t, h, w) in patches, set by the processor
        self.pixel_values = None  # the processor's output rows for this image

    @property
    def tokens(self):
        t, h, w = self.grid
        return t * h * w // 4


class Prompt:
    """A parsed chat request."""

    def __init__(self):
        self.model = None
        self.stream = False
        self.include_usage = False
        self.max_tokens = None
        self.messages = []   # [(role, [("text", str) | ("image", Image)])]
        self.images = []

    def build_ids(self):
        """Token ids in Qwen's chat layout, with one image token per merged patch, and the
        segments [("text", n) | ("image", (t, h, w))] the rope positions are computed from."""
        ids, segs = [], []

        def text(s):
            t = text_ids(s)
            ids.extend(t)
            return len(t)

        run = 0
        for role, parts in self.messages:
            ids.append(IM_START)
            run += 1 + text(role + "\n")
            for kind, val in parts:
                if kind == "text":
                    run += text(val)
                else:
                    ids.append(VISION_START)
                    run += 1
                    segs.append(("text", run))
                    run = 0
                    ids.extend([IMAGE_TOKEN] * val.tokens)
                    segs.append(("image", val.grid))
                    ids.append(VISION_END)
                    run += 1
            ids.append(IM_END)
            run += 1 + text("\n")
        ids.append(IM_START)
        run += 1 + text("assistant\n")
        segs.append(("text", run))
        return ids, segs


def _limit(root, name):
    v = root.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v > 1e15 or v != int(v):
        raise BadRequest("'%s' must be a non-negative integer" % name)
    return int(v)


def decode_image(url, max_pixels, want_key):
    """A data URI to an RGB PIL image; BadRequest with the reason when it is not one."""
    from PIL import Image as PILImage

    if not url.startswith("data:"):
        raise BadRequest("only data: URIs are accepted (this server fetches nothing)")
    comma = url.find(",")
    if comma < 0 or ";base64" not in url[5:comma]:
        raise BadRequest("the data URI is not base64 (want data:image/...;base64,...)")
    try:
        raw = base64.b64decode(url[comma + 1:], validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("the image data is not valid base64")
    if not raw:
        raise BadRequest("the image data is empty")
    try:
        im = PILImage.open(io.BytesIO(raw))
        w, h = im.size
        if w * h > max_pixels:
            raise BadRequest("image of %dx%d pixels is over the limit of %d" % (w, h, max_pixels))
        fmt = (im.format or "?").lower()
        im.load()
        if im.mode != "RGB":
            im = im.convert("RGB")
    except BadRequest:
        raise
    except Exception as e:  # PIL raises many kinds for a bad file: all are the client's fault
        raise BadRequest("cannot decode the image: %s" % (str(e)[:120] or type(e).__name__))
    key = None
    if want_key:
        hsh = hashlib.blake2b(digest_size=16)
        hsh.update(b"%dx%d:" % im.size)
        hsh.update(im.tobytes())
        key = hsh.hexdigest()
    return Image(im, fmt, len(raw), key)


def parse(body, max_image_pixels, want_keys):
    """The request body to a Prompt; raises BadRequest."""
    try:
        root = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON")
    if not isinstance(root, dict):
        raise BadRequest("request body must be a JSON object")
    p = Prompt()
    if isinstance(root.get("model"), str):
        p.model = root["model"]
    p.stream = root.get("stream") is True
    so = root.get("stream_options")
    p.include_usage = isinstance(so, dict) and so.get("include_usage") is True
    a, b = _limit(root, "max_tokens"), _limit(root, "max_completion_tokens")
    p.max_tokens = a if b is None else b if a is None else min(a, b)
    messages = root.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is required and must be a non-empty array")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise BadRequest("messages[%d] must be an object" % i)
        role = msg.get("role") if isinstance(msg.get("role"), str) else "user"
        content = msg.get("content")
        parts = []
        if isinstance(content, str):
            parts.append(("text", content))
        elif isinstance(content, list):
            for j, part in enumerate(content):
                where = "messages[%d].content[%d]" % (i, j)
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise BadRequest("%s: a part needs a string \"type\"" % where)
                kind = part["type"]
                if kind == "text":
                    if not isinstance(part.get("text"), str):
                        raise BadRequest("%s: a text part needs a string \"text\"" % where)
                    parts.append(("text", part["text"]))
                elif kind == "image_url":
                    iu = part.get("image_url")
                    url = iu.get("url") if isinstance(iu, dict) else iu
                    if not isinstance(url, str):
                        raise BadRequest("%s: an image_url part needs image_url.url" % where)
                    try:
                        img = decode_image(url, max_image_pixels, want_keys)
                    except BadRequest as e:
                        raise BadRequest("%s: %s" % (where, e))
                    parts.append(("image", img))
                    p.images.append(img)
                else:
                    raise BadRequest("%s: unsupported part type '%.40s'" % (where, kind))
        elif content is not None:
            raise BadRequest("messages[%d].content must be a string or a list of parts" % i)
        p.messages.append((role, parts))
    return p


# ---------------------------------------------------------------- replies

_ERROR_TYPES = {404: "not_found_error", 429: "rate_limit_error", 500: "server_error",
                503: "service_unavailable_error"}


def error_body(status, message):
    return json.dumps({"error": {"message": message,
                                 "type": _ERROR_TYPES.get(status, "invalid_request_error"),
                                 "param": None, "code": status}})


def usage(prompt_tokens, completion_tokens):
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion(rid, model, text, prompt_tokens, completion_tokens, finish="length"):
    return json.dumps({
        "id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": None, "finish_reason": finish}],
        "usage": usage(prompt_tokens, completion_tokens)})


def sse_chunk(rid, model, content=None, role=False, finish=None, usage_obj=None):
    o = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    if usage_obj is not None:
        o["choices"] = []
        o["usage"] = usage_obj
    else:
        delta = {}
        if role:
            delta["role"] = "assistant"
        if content is not None:
            delta["content"] = content
        o["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return b"data: " + json.dumps(o).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
