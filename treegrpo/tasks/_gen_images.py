"""Small-image tasks: 32x32 RGB scenes whose class shows in shape, colour and texture, under noise.

Every scene is drawn at 64x64 with PIL, box-downsampled to 32x32 (cheap anti-aliasing) and
perturbed with per-image lighting and pixel noise. Class cues overlap on purpose (distractor
shapes, shared palettes), so colour histograms beat the constant baseline and models that see
shape (a small CNN) beat the histograms.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

S = 64  # drawing canvas
OUT = 32


def _rgb(rng: np.random.Generator, base: tuple[int, int, int], spread: int) -> tuple[int, int, int]:
    jitter = rng.integers(-spread, spread + 1, 3).tolist()
    return tuple(min(255, max(0, int(b) + j)) for b, j in zip(base, jitter, strict=True))


def _finish(rng: np.random.Generator, img: Image.Image, noise: float) -> np.ndarray:
    """Downsample, then lighting and pixel noise: the same scene never renders twice alike."""
    arr = np.asarray(img.resize((OUT, OUT), Image.Resampling.BOX), dtype=np.float32)
    arr = arr * rng.uniform(0.8, 1.2) + rng.normal(0, 12, 3)
    arr += rng.normal(0, noise, arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8)


def _blotches(
    rng: np.random.Generator, draw: ImageDraw.ImageDraw, n: int, base, spread: int, rmin: int, rmax: int
) -> None:
    for _ in range(n):
        x, y = rng.integers(0, S, 2)
        r = int(rng.integers(rmin, rmax + 1))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=_rgb(rng, base, spread))


# ---- cactus-mini: aerial desert tiles, some with a columnar cactus --------------------------------
def cactus_scene(rng: np.random.Generator, has_cactus: bool) -> np.ndarray:
    img = Image.new("RGB", (S, S), _rgb(rng, (176, 150, 110), 25))
    draw = ImageDraw.Draw(img)
    _blotches(rng, draw, int(rng.integers(6, 14)), (150, 125, 90), 30, 2, 7)  # soil and rocks
    # round green-grey shrubs appear in both classes: greenness alone does not decide
    _blotches(rng, draw, int(rng.integers(0, 4)), (105, 125, 80), 25, 3, 6)
    if has_cactus:
        length, width = int(rng.integers(18, 40)), int(rng.integers(4, 8))
        cx, cy = rng.integers(12, S - 12, 2)
        angle = rng.uniform(0, np.pi)
        dx, dy = np.cos(angle) * length / 2, np.sin(angle) * length / 2
        colour = _rgb(rng, (85, 120, 70), 25)
        draw.line([cx - dx, cy - dy, cx + dx, cy + dy], fill=colour, width=width)
        if rng.random() < 0.5:  # an arm
            ax, ay = cx + dx * 0.2, cy + dy * 0.2
            draw.line([ax, ay, ax - dy * 0.5, ay + dx * 0.5], fill=colour, width=max(3, width - 2))
        shade = tuple(max(0, c - 45) for c in colour)
        draw.line([cx - dx + 3, cy - dy + 3, cx + dx + 3, cy + dy + 3], fill=shade, width=2)
    return _finish(rng, img, noise=14.0)


# ---- plant-mini: a leaf, healthy, with rust spots, scab patches, or both ---------------------------
PLANT_LABELS = ("healthy", "multiple_diseases", "rust", "scab")
PLANT_SHARE = (0.28, 0.05, 0.34, 0.33)  # the original competition's class balance


def _rust(rng: np.random.Generator, draw: ImageDraw.ImageDraw, box, n: int) -> None:
    x0, y0, x1, y1 = box
    for _ in range(n):
        x, y = rng.uniform(x0 + 6, x1 - 6), rng.uniform(y0 + 6, y1 - 6)
        r = rng.uniform(1.5, 3.5)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=_rgb(rng, (205, 120, 40), 30))


def _scab(rng: np.random.Generator, draw: ImageDraw.ImageDraw, box, n: int) -> None:
    x0, y0, x1, y1 = box
    for _ in range(n):
        cx, cy = rng.uniform(x0 + 8, x1 - 8), rng.uniform(y0 + 8, y1 - 8)
        pts = [(cx + rng.uniform(-6, 6), cy + rng.uniform(-6, 6)) for _ in range(6)]
        draw.polygon(pts, fill=_rgb(rng, (95, 90, 60), 20))


def plant_scene(rng: np.random.Generator, label: int) -> np.ndarray:
    img = Image.new("RGB", (S, S), _rgb(rng, (90, 80, 70), 40))
    draw = ImageDraw.Draw(img)
    _blotches(rng, draw, 4, (70, 90, 60), 30, 4, 10)  # out-of-focus background
    w, h = rng.uniform(34, 58), rng.uniform(22, 40)
    cx, cy = rng.uniform(26, 38, 2)
    box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
    draw.ellipse(box, fill=_rgb(rng, (95, 150, 65), 25))
    draw.line([box[0] + 3, cy, box[2] - 3, cy], fill=_rgb(rng, (130, 175, 95), 15), width=1)  # midrib
    _blotches(rng, draw, 2, (120, 140, 60), 20, 2, 4)  # glare and dirt, any class
    name = PLANT_LABELS[label]
    if name in ("rust", "multiple_diseases"):
        _rust(rng, draw, box, int(rng.integers(3, 9)))
    if name in ("scab", "multiple_diseases"):
        _scab(rng, draw, box, int(rng.integers(1, 4)))
    return _finish(rng, img, noise=12.0)


# ---- dogscats-mini: a head with pointed ears (cat) or drooping ears and a muzzle (dog) -------------
FUR = ((60, 50, 45), (150, 110, 70), (200, 190, 175), (110, 100, 95), (215, 160, 90), (30, 30, 30))


def _cat_ears(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, fur, width: float) -> None:
    for side in (-1, 1):
        bx = cx + side * r * 0.55
        draw.polygon(
            [(bx - width, cy - r * 0.6), (bx + width, cy - r * 0.6), (bx + side * 3, cy - r - 9)], fill=fur
        )


def _dog_ears(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, fur) -> None:
    for side in (-1, 1):
        ex = cx + side * r * 0.95
        draw.ellipse([ex - 5, cy - r * 0.6, ex + 5, cy + r * 0.7], fill=tuple(max(0, c - 35) for c in fur))


def pet_scene(rng: np.random.Generator, is_dog: bool) -> np.ndarray:
    """Cues are tendencies, not rules: some dogs prick their ears, some cats show a muzzle."""
    img = Image.new("RGB", (S, S), _rgb(rng, (140, 140, 140), 70))
    draw = ImageDraw.Draw(img)
    _blotches(rng, draw, 5, (130, 130, 120), 60, 3, 9)
    fur = _rgb(rng, FUR[int(rng.integers(len(FUR)))], 25)
    cx, cy = rng.uniform(22, 42), rng.uniform(26, 42)
    r = rng.uniform(11, 17)
    pricked = rng.random() < (0.15 if is_dog else 0.92)
    if pricked:
        _cat_ears(draw, cx, cy, r, fur, 7 if is_dog else 6)
    else:
        _dog_ears(draw, cx, cy, r, fur)
    draw.ellipse([cx - r, cy - r * 0.9, cx + r, cy + r * 0.9], fill=fur)
    if rng.random() < (0.9 if is_dog else 0.1):  # a protruding muzzle with a dark nose
        draw.ellipse([cx - r * 0.5, cy + r * 0.1, cx + r * 0.5, cy + r * 1.0], fill=_rgb(rng, fur, 30))
        draw.ellipse([cx - 2.5, cy + r * 0.25, cx + 2.5, cy + r * 0.25 + 4], fill=(20, 15, 15))
    else:
        draw.polygon([(cx - 2, cy + 2), (cx + 2, cy + 2), (cx, cy + 4)], fill=(200, 120, 120))
    green = rng.random() < (0.35 if is_dog else 0.65)
    eye = _rgb(rng, (120, 160, 40) if green else (40, 40, 20), 30)
    for side in (-1, 1):
        ex = cx + side * r * 0.4
        draw.ellipse([ex - 2, cy - r * 0.3 - 2, ex + 2, cy - r * 0.3 + 2], fill=eye)
    _blotches(rng, draw, int(rng.integers(0, 3)), (130, 130, 120), 60, 3, 7)  # occluders
    return _finish(rng, img, noise=16.0)
