"""Images and files in the context (SPEC §15): content parts of the user turn, never text."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, TextContent

import struckdown as sd
from media_support import PDF, WAV, png, shape, user_contents
from scripted import Call, Script

RED = png(4, 3, 200)
BLUE = png(5, 2, 50)


def recording(answer: Any = "ok") -> Script:
    return Script(lambda call: answer(call) if callable(answer) else answer)


def sent(call: Call) -> list[Any]:
    return [shape(c) for c in user_contents(call.messages)]


def test_a_png_arrives_as_binary_content_in_its_turn_at_its_position(tmp_path: Path) -> None:
    path = tmp_path / "receipt.png"
    path.write_bytes(RED)
    script = recording()
    sd.complete("Receipt: {{ photo }} What is the total? [[total]] And the date? [[when]]",
                {"photo": sd.Image(path)}, model=script.model())
    assert sent(script.calls[0]) == [["Receipt: ", ("binary", "image/png", RED), " What is the total?"]]
    # the next slot's request: the image stays in the first user turn; its own turn is text
    assert sent(script.calls[1]) == [["Receipt: ", ("binary", "image/png", RED), " What is the total?"], "And the date?"]
    first = user_contents(script.calls[0].messages)[0][1]
    assert isinstance(first, BinaryContent) and first.is_image and first.vendor_metadata is None


def test_lists_of_images_render_as_each_image_in_order() -> None:
    script = recording()
    context = {"photos": [sd.Image(RED), sd.Image(BLUE)], "pair": (sd.Image(BLUE), sd.Image(RED))}
    sd.complete("{% for p in photos %}Photo {{ loop.index }}: {{ p }}\n{% endfor %}Which is red? [[a]]"
                "<checkpoint>All: {{ photos }} then {{ pair }} [[b]]", context, model=script.model())
    red, blue = ("binary", "image/png", RED), ("binary", "image/png", BLUE)
    assert sent(script.calls[0]) == [["Photo 1: ", red, "\nPhoto 2: ", blue, "\nWhich is red?"]]
    assert sent(script.calls[1]) == [["All: ", red, blue, " then ", blue, red]]


def test_a_list_mixing_images_and_text_is_a_clear_error() -> None:
    script = recording()
    with pytest.raises(sd.TemplateRuntimeError, match="mixes images or files with other values"):
        sd.complete("See {{ xs }} [[a]]", {"xs": [sd.Image(RED), "text"]}, model=script.model())
    assert script.calls == []


def test_header_and_user_turns_carry_images_too() -> None:
    script = recording()
    sd.complete("<header>Scan: {{ scan }}</header><user>Also {{ other }}</user>Read both. [[a]]",
                {"scan": sd.Image(RED), "other": sd.Image(BLUE)}, model=script.model())
    assert sent(script.calls[0]) == [
        ["Scan: ", ("binary", "image/png", RED)],
        ["Also ", ("binary", "image/png", BLUE)],
        "Read both.",
    ]


def test_an_image_inside_system_is_a_template_runtime_error_before_any_request() -> None:
    script = recording()
    with pytest.raises(sd.TemplateRuntimeError, match=r"cannot go in <system>") as caught:
        sd.complete("<system>Logo: {{ logo }}</system>Hello [[a]]", {"logo": sd.Image(RED)}, model=script.model())
    assert isinstance(caught.value, sd.MediaError)
    assert f"<image image/png {len(RED)} B sha256:" in str(caught.value)
    assert script.calls == []


def test_an_image_in_an_assistant_turn_is_refused() -> None:
    script = recording()
    with pytest.raises(sd.MediaError, match="cannot go in an assistant turn"):
        sd.complete("<assistant>Here: {{ logo }}</assistant>Hello [[a]]", {"logo": sd.Image(RED)}, model=script.model())
    assert script.calls == []


def test_more_images_than_max_images_fail_before_the_request() -> None:
    script = recording()
    many = [sd.Image(png(1, 1, i)) for i in range(51)]
    with pytest.raises(sd.MediaError, match=r"would hold 51 images .* the limit is max_images=50"):
        sd.complete("{{ photos }} Count them. [[n]]", {"photos": many}, model=script.model())
    assert script.calls == []
    sd.complete("{{ photos }} Count them. [[n]]", {"photos": many[:50]}, model=script.model())
    assert len(script.calls) == 1 and len(sent(script.calls[0])[0]) == 51  # 50 images, one text part


def test_max_images_counts_earlier_turns_and_can_be_set_or_lifted() -> None:
    script = recording()
    template = "{{ a }}{{ b }} First [[x]] Now {{ c }} [[y]]"
    context = {"a": sd.Image(RED), "b": sd.Image(BLUE), "c": sd.Image(png(2, 2, 9))}
    with pytest.raises(sd.MediaError, match="would hold 3 images"):
        sd.complete(template, context, model=script.model(), max_images=2)
    assert len(script.calls) == 1  # the first request (2 images) went out; the second was refused
    sd.complete(template, context, model=script.model(), max_images=None)
    assert len(script.calls) == 3
    with pytest.raises(ValueError, match="max_images must be a whole number"):
        sd.complete(template, context, model=script.model(), max_images=-1)


def _size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.size


def test_an_oversized_image_is_shrunk_to_image_max_side() -> None:
    script = recording()
    big, small = png(3000, 1000, 120), png(300, 200, 30)
    sd.complete("{{ big }} {{ small }} Describe. [[a]]", {"big": sd.Image(big), "small": sd.Image(small)}, model=script.model())
    (content,) = user_contents(script.calls[0].messages)
    assert [type(p).__name__ for p in content[:2]] == ["BinaryImage", "BinaryImage"]
    assert content[0].media_type == "image/png" and _size(content[0].data) == (2048, 683)
    assert content[1].data == small  # it fits: sent byte for byte as given
    sd.complete("{{ big }} Describe. [[a]]", {"big": sd.Image(big)}, model=script.model(), image_max_side=100)
    assert _size(user_contents(script.calls[1].messages)[0][0].data) == (100, 33)
    sd.complete("{{ big }} Describe. [[a]]", {"big": sd.Image(big)}, model=script.model(), image_max_side=None)
    assert user_contents(script.calls[2].messages)[0][0].data == big


def test_without_pillow_an_oversized_image_is_refused_and_a_fitting_one_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    script = recording()
    big = sd.Image(png(3000, 1000))
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now fails as if it were not installed
    with pytest.raises(sd.MediaError, match=r"3000x1000 pixels, larger than image_max_side=2048.*struckdown\[images\]"):
        sd.complete("{{ big }} Describe. [[a]]", {"big": big}, model=script.model())
    assert script.calls == []
    sd.complete("{{ small }} Describe. [[a]]", {"small": sd.Image(RED)}, model=script.model())
    assert sent(script.calls[0]) == [[("binary", "image/png", RED), " Describe."]]


class MemoryCache:
    def __init__(self) -> None:
        self.store: dict[str, Any] = {}

    async def aget(self, key: str) -> Any:
        return self.store.get(key)

    async def aput(self, key: str, value: Any) -> None:
        self.store[key] = value


def test_two_runs_differing_only_in_the_image_bytes_never_share_a_cache_entry() -> None:
    cache = MemoryCache()
    script = Script(lambda call: f"answer {len(script.calls)}")
    template = "What is in {{ photo }}? [[a]]"
    first = sd.complete(template, {"photo": sd.Image(RED)}, model=script.model(), cache=cache)
    second = sd.complete(template, {"photo": sd.Image(BLUE)}, model=script.model(), cache=cache)
    again = sd.complete(template, {"photo": sd.Image(RED)}, model=script.model(), cache=cache)
    assert len(script.calls) == 2 and len(cache.store) == 2
    assert (first["a"], second["a"], again["a"]) == ("answer 1", "answer 2", "answer 1")
    assert [r.results["a"].cached for r in (first, second, again)] == [False, False, True]
    assert all("image" not in str(v) for v in cache.store.values())  # only the answer is stored


def test_slot_result_messages_hold_a_placeholder_not_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "receipt.png"
    path.write_bytes(RED)
    result = sd.complete("Look {{ photo }} now [[a]]", {"photo": sd.Image(path)}, model=recording().model())
    messages = result.results["a"].messages
    content = user_contents(list(messages))[0]
    digest = sd.Image(RED).sha256
    text = f"<image receipt.png image/png {len(RED)} B sha256:{digest[:8]}…>"
    assert shape(content) == ["Look ", ("text-content", text), " now"]
    assert isinstance(content[1], TextContent)
    assert content[1].metadata == {"struckdown_media": {
        "kind": "image", "name": "receipt.png", "media_type": "image/png", "bytes": len(RED), "sha256": digest}}
    dumped = ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
    import base64

    assert base64.b64encode(RED).decode()[:20] not in dumped and "binary" not in dumped
    assert "\\x89PNG" not in repr(messages)


def test_media_values_read_as_their_placeholder_outside_a_run() -> None:
    image = sd.Image(RED, detail="low")
    assert repr(image) == str(image) == f"<image image/png {len(RED)} B sha256:{image.sha256[:8]}…>"
    assert f"{image}" == str(image) and "%s" % image == str(image)  # what a log line would hold
    import pickle

    assert pickle.loads(pickle.dumps(image)) == image  # rows travel to Dask workers
    assert sd.parse("x").environment.renderer.render_text("A {{ p }} B", {"p": image}) == f"A {image!r} B"


def test_text_that_looks_like_a_media_token_stays_text() -> None:
    forged = "\ue000sd" + "0123456789abcdef" + "#0\ue001"
    script = Script(lambda call: f"echo {forged}" if len(script.calls) == 1 else "done")
    sd.complete("{{ photo }} and {{ evil }} [[a]] Then {{ a }} [[b]]", {"photo": sd.Image(RED), "evil": forged},
                model=script.model())
    assert sent(script.calls[0]) == [[("binary", "image/png", RED), f" and {forged}"]]
    assert sent(script.calls[1])[-1] == f"Then echo {forged}"


def test_urls_become_url_parts_and_files_binary_parts() -> None:
    script = recording()
    context = {
        "web": sd.Image("https://example.com/shots/a.png", detail="high"),
        "doc": sd.File("https://example.com/report.pdf"),
        "song": sd.File("https://example.com/a.mp3"),
        "clip": sd.File("https://example.com/clip.mp4?t=3"),
        "pdf": sd.File(PDF),
        "wav": sd.File(WAV, name="hello.wav"),
    }
    sd.complete("{{ web }}{{ doc }}{{ song }}{{ clip }}{{ pdf }}{{ wav }} Summarise. [[a]]", context, model=script.model())
    (content,) = user_contents(script.calls[0].messages)
    assert shape(content) == [
        ("image-url", "https://example.com/shots/a.png"),
        ("document-url", "https://example.com/report.pdf"),
        ("audio-url", "https://example.com/a.mp3"),
        ("video-url", "https://example.com/clip.mp4?t=3"),
        ("binary", "application/pdf", PDF),
        ("binary", "audio/wav", WAV),
        " Summarise.",
    ]
    assert content[0].vendor_metadata == {"detail": "high"}


def test_attach_is_the_0x_way_in(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(RED)
    (tmp_path / "b.png").write_bytes(BLUE)
    (tmp_path / "c.pdf").write_bytes(PDF)
    photos = sd.attach([tmp_path / "a.png", str(tmp_path / "b.png")], detail="low")
    pdf = sd.attach(tmp_path / "c.pdf")
    assert [type(p).__name__ for p in photos] == ["Image", "Image"] and type(pdf).__name__ == "File"
    tagged = sd.attach(RED, metadata=True)
    script = recording()
    sd.complete("{{ photos }} {{ pdf }} {{ tagged }} Go [[a]]", {"photos": photos, "pdf": pdf, "tagged": tagged},
                model=script.model())
    (content,) = user_contents(script.calls[0].messages)
    assert shape(content) == [
        ("binary", "image/png", RED), ("binary", "image/png", BLUE), ("binary", "application/pdf", PDF),  # blanks dropped
        ("binary", "image/png", RED), '[metadata of the image above: {"size": "4x3"}]', " Go",
    ]
    assert content[0].vendor_metadata == {"detail": "low"}
    with pytest.raises(ValueError, match="detail= and metadata= are for images"):
        sd.attach(PDF, detail="low")


def test_bad_sources_fail_when_the_value_is_made(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        sd.Image(tmp_path / "missing.png")
    with pytest.raises(ValueError, match="is application/pdf, not an image; use sd.File"):
        sd.Image(PDF)
    with pytest.raises(ValueError, match="cannot tell what kind of image"):
        sd.Image(b"just some bytes")
    with pytest.raises(ValueError, match="detail must be one of auto, low, high, original"):
        sd.Image(RED, detail="max")
    with pytest.raises(TypeError, match="takes a path, bytes, a URL"):
        sd.Image(42)
    with pytest.raises(ValueError, match="no bytes"):
        sd.File(b"")
    assert sd.Image(RED, media_type="image/png") == sd.Image(RED) != sd.Image(BLUE)
    assert sd.Image("data:image/png;base64," + __import__("base64").b64encode(RED).decode()).data == RED


def test_guards_and_together_members_see_the_image_when_streaming() -> None:
    script = Script(lambda call: {"triggered": False, "reason": ""} if call.schema and "triggered" in str(call.schema) else "ok")
    image = sd.Image(RED)

    async def run() -> list[Any]:
        return [e async for e in sd.complete_incremental_async(
            "{{ photo }} Is it safe? [[halt:g]]\nLook: {{ photo }}\n<together>Colour? [[a]] Shape? [[b]]</together>",
            {"photo": image}, model=script.model())]

    events = asyncio.run(run())
    assert events[-1].type == "processing_complete"
    assert len(script.calls) == 3
    for call in script.calls:
        assert ("binary", "image/png", RED) in [p for c in sent(call) if isinstance(c, list) for p in c]


def test_templates_may_read_a_media_value_s_name_and_type(tmp_path: Path) -> None:
    path = tmp_path / "scan.png"
    path.write_bytes(RED)
    script = recording()
    sd.complete("File {{ photo.name }} ({{ photo.media_type }}): {{ photo }} [[a]]", {"photo": sd.Image(path)},
                model=script.model())
    assert sent(script.calls[0]) == [["File scan.png (image/png): ", ("binary", "image/png", RED)]]


def test_a_file_named_like_an_image_whose_bytes_are_not_one_is_a_value_error(tmp_path: Path) -> None:
    """Issue 39 N18: text named `.png` was sent as image/png (docs/images.md promises a ValueError)."""
    notes = tmp_path / "notes.png"
    notes.write_text("hello, not a picture")
    named = r"'notes.png' is named like image/png but its bytes are not one \(they start b'hello, n'\)"
    with pytest.raises(ValueError, match=named):
        sd.Image(notes)
    with pytest.raises(ValueError, match="named like image/png"):
        sd.attach(notes)
    (tmp_path / "real.png").write_bytes(RED)
    assert sd.Image(tmp_path / "real.png").media_type == "image/png"
    assert sd.File(notes, media_type="text/plain").media_type == "text/plain"  # the caller may say what it is


def test_svg_is_refused_from_a_path_bytes_or_a_url(tmp_path: Path) -> None:
    drawing = tmp_path / "logo.svg"
    drawing.write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    for make in (
        lambda: sd.Image(drawing),
        lambda: sd.attach(drawing),
        lambda: sd.File(drawing),
        lambda: sd.Image("https://example.org/logo.svg"),
        lambda: sd.Image(drawing.read_bytes(), media_type="image/svg+xml"),
    ):
        with pytest.raises(ValueError, match="is SVG, which is not sent: .* convert it to PNG first"):
            make()


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/proc/self/environ", "/proc/self/cmdline", "/sys/kernel"])
def test_device_and_kernel_paths_are_refused_by_name(path: str) -> None:
    """Issue 39 N18: `/dev/zero` never ends and `/proc/self/environ` holds the keys."""
    with pytest.raises(ValueError, match=f"sd.Image: {path} is a device or kernel file"):
        sd.Image(path)


def test_a_symlink_to_a_device_and_a_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "photo.png").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=r"photo.png is a device or kernel file \(/dev/zero\)"):
        sd.File(tmp_path / "photo.png")
    with pytest.raises(ValueError, match="is a folder, not a regular file"):
        sd.File(tmp_path)
