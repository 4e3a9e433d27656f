#!/usr/bin/env python3
"""Copies the community AAGUID list's icons (and names missing here) into web/aaguids.json.

Usage: python3 scripts/provider-icons.py <aaguid.json of passkeydeveloper/passkey-authenticator-aaguids> <its commit>

Each icon is decoded and checked the way the server checks it on load (PasskeyProviderIcons):
a base64 data: URL of image/png (with the PNG signature) or image/svg+xml (an <svg> root that
parses as XML), at most MAX_BYTES decoded. Anything else is left out and named on stderr. "dark"
is written only when it differs from "light" (the server serves "light" for both then).
"""
import base64
import json
import re
import sys
import xml.etree.ElementTree as ET

MAX_BYTES = 16384
AAGUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
PNG = b'\x89PNG\r\n\x1a\n'


def checked(url):
    m = re.fullmatch(r'data:(image/png|image/svg\+xml);base64,([A-Za-z0-9+/=\s]+)', url)
    if not m:
        return None
    raw = base64.b64decode(''.join(m.group(2).split()), validate=True)
    if not 0 < len(raw) <= MAX_BYTES:
        return None
    if m.group(1) == 'image/png':
        return url if raw.startswith(PNG) else None
    try:
        root = ET.fromstring(raw)
    except ET.ParseError:
        return None
    return url if root.tag in ('svg', '{http://www.w3.org/2000/svg}svg') else None


def main():
    source, commit = sys.argv[1], sys.argv[2]
    with open(source, encoding='utf-8') as f:
        community = json.load(f)
    with open('web/aaguids.json', encoding='utf-8') as f:
        ours = json.load(f)
    names, icons = ours['aaguids'], {}
    for aaguid, entry in sorted(community.items()):
        if not AAGUID.match(aaguid) or not isinstance(entry, dict):
            continue
        if aaguid not in names and isinstance(entry.get('name'), str) and entry['name'].strip():
            names[aaguid] = entry['name'].strip()
        light = checked(entry['icon_light']) if 'icon_light' in entry else None
        dark = checked(entry['icon_dark']) if 'icon_dark' in entry else None
        if ('icon_light' in entry and not light) or ('icon_dark' in entry and not dark):
            print(f'{aaguid}: an icon is not a small PNG or SVG data: URL; left out', file=sys.stderr)
        light = light or dark
        if not light:
            continue
        icons[aaguid] = {'light': light} if dark in (None, light) else {'light': light, 'dark': dark}
    ours['about'] = 'AAGUID -> passkey provider name and icon, shown next to each passkey so people can tell them apart. Display only: never a security decision (AAGUIDs are self-reported unless attested). "icons": light and dark data: URLs (PNG or SVG, at most 16 KiB each; "dark" only where it differs), served by GET /v1/providers/{aaguid}/icon.'
    ours['source'] = (f'passkeydeveloper/passkey-authenticator-aaguids on GitHub (community list; aaguid.json at commit {commit}), '
                      'copied by scripts/provider-icons.py: names (those already here kept as they were) and icons.')
    ours['licence'] = ('The source list is described as MIT-licensed (not confirmed here: the copy checked carried no LICENSE file). '
                       'Names are facts (identifier -> product name); the icons are the providers\' logos as they submitted them to '
                       'that list for display next to their names, and remain their owners\' marks. Keep this note when adding '
                       'entries, and add only pairs checked against that list or the provider\'s own documentation.')
    ours['aaguids'] = dict(sorted(names.items()))
    ours['icons'] = icons
    with open('web/aaguids.json', 'w', encoding='utf-8') as f:
        json.dump(ours, f, indent=2, ensure_ascii=False)
        f.write('\n')
    print(f'{len(names)} names, {len(icons)} icons', file=sys.stderr)


if __name__ == '__main__':
    main()
