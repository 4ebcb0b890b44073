#!/usr/bin/env python3
"""check-png.py FILE.svg FILE.png: a renderer drew the schedule picture.

FILE.png is what a standard SVG renderer (rsvg-convert) made of FILE.svg.
Decodes the PNG with the standard library (8-bit RGB or RGBA, not
interlaced: what rsvg-convert writes) and checks that it is the size the SVG
asks for, that it is not blank, and that every colour the SVG draws solid
(the arrowheads of each channel used, the grey band of collapsed ranks)
appears in it exactly. Prints what it found.
"""
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"


def fail(message):
    print(f"check-png: {message}", file=sys.stderr)
    sys.exit(1)


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, header, idat = 8, None, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        fail(f"{path} has no IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}: not decoded here")
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif kind != 0:
                fail(f"{path}: row {y} has filter {kind}")
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main(svg_path, png_path):
    root = ET.parse(svg_path).getroot()
    want_w, want_h = int(root.get("width")), int(root.get("height"))
    width, height, bpp, rows = read_png(png_path)
    if (width, height) != (want_w, want_h):
        fail(f"the image is {width}x{height}, the SVG asks for {want_w}x{want_h}")
    colours = set()
    drawn = 0
    for row in rows:
        for i in range(0, len(row), bpp):
            px = row[i:i + bpp]
            if bpp == 4 and px[3] != 255:
                drawn += px[3] != 0
                continue
            colours.add("#%02x%02x%02x" % (px[0], px[1], px[2]))
            drawn += 1
    if drawn * 100 < width * height:
        fail(f"only {drawn} of {width * height} pixels drawn: the picture is blank")
    # Solid colours: the arrowhead of each channel that has a send, the band.
    markers = {m.get("id"): m.find(NS + "path").get("fill") for m in root.iter(NS + "marker")}
    solid = set()
    for line in root.iter(NS + "line"):
        if line.get("class") == "send":
            solid.add(markers[re.fullmatch(r"url\(#(.*)\)", line.get("marker-end")).group(1)])
    for g in root.iter(NS + "g"):
        if g.get("class") == "band":
            solid.add(g.find(NS + "rect").get("fill"))
    missing = sorted(c for c in solid if c not in colours)
    if missing:
        fail(f"colours drawn in the SVG but not in the image: {', '.join(missing)}")
    print(f"png ok: {width}x{height}, {len(solid)} solid colours found, "
          f"{100 * drawn // (width * height)}% drawn")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
