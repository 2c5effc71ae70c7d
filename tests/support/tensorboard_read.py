"""The events of TensorBoard files, as the tensorboard package's own reader reads them.

  tensorboard_read.py FILE...
  tensorboard_read.py --each FILE...
Prints one JSON object: {"scalars": [[tag, step, value], ...], "images": [[tag, step, width,
height, png_bytes], ...]} in file order; with --each, {"files": [that object, one per FILE]}.
The reader stops reading a file at the first record whose length or data CRC does not match
(it warns and carries on as if the file ended there), so a corrupt record shows as the events
after it missing.
"""
import json
import sys

from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto import event_pb2


def events(paths):
    scalars, images = [], []
    for path in paths:
        for raw in RawEventFileLoader(path, detect_file_replacement=False).Load():
            event = event_pb2.Event.FromString(raw)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.append([value.tag, event.step, value.simple_value])
                elif value.HasField("image"):
                    images.append([value.tag, event.step, value.image.width, value.image.height,
                                   len(value.image.encoded_image_string)])
    return {"scalars": scalars, "images": images}


if sys.argv[1:2] == ["--each"]:
    print(json.dumps({"files": [events([path]) for path in sys.argv[2:]]}))
else:
    print(json.dumps(events(sys.argv[1:])))
