"""What the purple agent sees of a frame: its size and encoding (EvalConfig.obs_size / obs_encoding).

`jpeg_bgr` gives a cv2-decoding purple the pixels MCU-AgentBeats' green gives it: that green passes the simulator's
RGB frame to cv2.imencode, which reads the array as BGR, so the JPEG's red channel holds the frame's blue. Pillow
writes the same file from the channel-swapped array, at cv2's default quality (95) and chroma subsampling (4:2:0),
so opencv is not a dependency. The step log keeps an RGB PNG of every frame whatever the agent is sent, because
video evaluation and people read those files.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcu_arms.contracts.wire import DEFAULT_OBS_ENCODING, DEFAULT_OBS_SIZE, ObsEncoding

if TYPE_CHECKING:
    import numpy as np

PNG_COMPRESS_LEVEL = 1  # frames are small; speed matters more than bytes on loopback
CV2_JPEG_QUALITY = 95  # cv2.imencode's default IMWRITE_JPEG_QUALITY
CV2_JPEG_SUBSAMPLING = 2  # Pillow's code for 4:2:0, libjpeg's (and so cv2's) default


@dataclass(frozen=True)
class EncodedFrame:
    obs: bytes  # what the agent is sent
    png: bytes | None  # the RGB frame as PNG for the step log; None when frames are not kept


NO_FRAME = EncodedFrame(obs=b"", png=None)  # a step rendered no frame: the arm observes the state alone, saves none


def encode_png(frame: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


class FrameEncoder:
    """Encodes each frame for the agent; at the default (the frame's own size, PNG) one encoding serves both uses."""

    def __init__(
        self,
        size: tuple[int, int] = DEFAULT_OBS_SIZE,
        encoding: ObsEncoding = DEFAULT_OBS_ENCODING,
        *,
        keep_frames: bool = True,
    ) -> None:
        self.size: tuple[int, int] = (size[0], size[1])
        self.encoding = encoding
        self.keep_frames = keep_frames

    def encode(self, frame: np.ndarray) -> EncodedFrame:
        sized = self._resized(frame)
        if self.encoding == "png":
            png = encode_png(sized)
            return EncodedFrame(obs=png, png=png)
        channels = sized[..., ::-1] if self.encoding == "jpeg_bgr" else sized
        return EncodedFrame(obs=_jpeg(channels), png=encode_png(sized) if self.keep_frames else None)

    def _resized(self, frame: np.ndarray) -> np.ndarray:
        """The frame at (width, height); a backend that renders at that size already is passed through untouched."""
        height, width = frame.shape[:2]
        if (width, height) == self.size:
            return frame
        import numpy as np
        from PIL import Image

        return np.asarray(Image.fromarray(frame).resize(self.size, Image.Resampling.BILINEAR))


def _jpeg(array: np.ndarray) -> bytes:
    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(array))
    image.save(buffer, format="JPEG", quality=CV2_JPEG_QUALITY, subsampling=CV2_JPEG_SUBSAMPLING)
    return buffer.getvalue()
