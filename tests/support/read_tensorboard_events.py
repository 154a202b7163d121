#!/usr/bin/env python3
"""Prints every scalar of a TensorBoard run folder as read by TensorBoard's own reader, one line
each: `tag step value wall_time`, sorted; the test of `lrmoe export` compares them with the
database. Usage: read_tensorboard_events.py RUN_FOLDER"""

import sys

from tensorboard.backend.event_processing import event_accumulator


def main(folder):
    # size_guidance 0: every event, none sampled away.
    accumulator = event_accumulator.EventAccumulator(
        folder, size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    for tag in sorted(accumulator.Tags()["scalars"]):
        for event in accumulator.Scalars(tag):
            print(f"{tag} {event.step} {event.value!r} {event.wall_time!r}")


if __name__ == "__main__":
    main(sys.argv[1])
