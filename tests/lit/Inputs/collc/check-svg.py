#!/usr/bin/env python3
"""check-svg.py FILE.svg: the schedule picture is well-formed and drawn right.

Parses the SVG as XML (a malformed file fails here) and checks its geometry:
every step box lies inside the view box and on its lane's row, no two step
boxes overlap, and every send arrow starts on the right edge of a step box
(or in the band of collapsed ranks) and ends on the left edge of a step box
further right (or in the band). Prints the counts it checked.
"""
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main(path):
    root = ET.parse(path).getroot()
    assert root.tag == NS + "svg", f"root is {root.tag}"
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    boxes = []  # (x, y, w, h)
    for lane in root.iter(NS + "g"):
        if lane.get("class") != "lane":
            continue
        rows = set()
        for step in lane.findall(NS + "g"):
            assert step.get("class") == "step", step.get("class")
            title = step.find(NS + "title")
            assert title is not None and title.text.startswith("rank "), "a step without a tooltip"
            rect = step.find(NS + "rect")
            x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
            assert 0 <= x and x + w <= width and 0 <= y and y + h <= height, f"box outside: {title.text}"
            rows.add(y)
            boxes.append((x, y, w, h))
        assert len(rows) <= 1, f"a lane's steps on {len(rows)} rows"
    seen = {}
    for b in boxes:
        key = (b[0], b[1])
        assert key not in seen, f"two step boxes at {key}"
        seen[key] = b
    bands = [(float(r.get("y")), float(r.get("height")))
             for g in root.iter(NS + "g") if g.get("class") == "band"
             for r in g.findall(NS + "rect")]

    def in_band(y):
        return any(top <= y <= top + h for top, h in bands)

    sends = 0
    for line in root.iter(NS + "line"):
        if line.get("class") != "send":
            continue
        sends += 1
        x1, y1, x2, y2 = (float(line.get(k)) for k in ("x1", "y1", "x2", "y2"))
        starts = in_band(y1) or any(x + w == x1 and y <= y1 <= y + h for x, y, w, h in boxes)
        ends = in_band(y2) or any(x == x2 and y <= y2 <= y + h for x, y, w, h in boxes)
        assert starts and ends, f"a send arrow not between steps: {x1},{y1} -> {x2},{y2}"
        assert x2 >= x1 or in_band(y1) or in_band(y2), f"a send arrow runs backwards: {x1} -> {x2}"
    print(f"svg ok: {len(boxes)} steps, {sends} sends, {len(bands)} bands")


if __name__ == "__main__":
    main(sys.argv[1])
