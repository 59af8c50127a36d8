"""``npformer data tatoeba``: fetch a Tatoeba pair file into the student's own folder."""

from __future__ import annotations

import argparse

from ..tasks.checks import check_folder_can_be_created


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "data", help="fetch the real data the course trains on (needs internet once)",
        description="tatoeba: download a Tatoeba pair file (the Tatoeba Project's sentence pairs, CC-BY 2.0 FR, "
                    "via manythings.org/anki), unpack it into OUT/PAIR/ (default data/fra-eng/fra.txt, in the "
                    "current folder) and check it; the lessons that train on real data read it from there.")
    parser.add_argument("what", choices=("tatoeba",), help="the data to fetch")
    parser.add_argument("--pair", default="fra-eng", help="manythings.org's name of the pair (default: %(default)s)")
    parser.add_argument("--out", default="data", help="the folder to unpack into, PAIR/ inside it (default: %(default)s, in the current folder: "
                             "the lessons look for data/fra-eng/fra.txt in the folder they run in)")
    parser.add_argument("--url", default=None,
                        help="where to download the zip from (default: https://www.manythings.org/anki/PAIR.zip; "
                             "a path or file:///path/to/it.zip for a copy you have)")
    parser.add_argument("--force", action="store_true", help="download again over a usable file already there (one that is not usable is replaced anyway)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data import ATTRIBUTION
    from ..data.download import check_pair, download_pairs, local_pairs_file

    check_pair(args.pair)
    check_folder_can_be_created(str(local_pairs_file(args.pair, args.out).parent))
    path, report, done = download_pairs(args.pair, args.out, url=args.url, force=args.force)
    print(report.summary())
    print(f"{done + ' (--force downloads again)' if done == 'already here' else done}: {path}")
    print(f"data: {ATTRIBUTION}")
    return 0
