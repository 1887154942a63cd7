"""The benchmark's fake Archives, asked over loopback (a socket: an integration test)."""

from __future__ import annotations

import urllib.request

from bench.archives import FakeArchives, FakeSpec
from ibi.core.pairlist import encode_query, parse_pair_list

ITEM = "8JMKD3MGP8W/35MMLL8"


def test_fake_archives_answer_in_their_own_process_and_count_url_requests() -> None:
    specs = [FakeSpec("8JMKD3MGP8W/3FSUP4L", 0.0, {ITEM: "state Original\n"})]
    specs.append(FakeSpec("8JMKD3MGP8W/3FSUP4M", 0.0, {}))
    with FakeArchives(specs) as archives:
        answers = []
        for spec, address in zip(specs, archives.addresses, strict=True):
            query = encode_query([("servicesubject", "urlRequest"), ("parsedibiurl.ibi", ITEM)])
            url = f"http://{address}/{spec.service_ibi}?{query}"
            with urllib.request.urlopen(url, timeout=10) as response:
                answers.append(parse_pair_list(response.read()))
        assert [a.word("state") for a in answers] == ["Original", None]
        assert archives.counted() == 2
