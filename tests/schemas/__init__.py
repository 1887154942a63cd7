"""The official XML schemas an Archive's OAI-PMH answers are checked against, read offline.

The ``.xsd`` files beside this module are the OAI-PMH 2.0 schema, oai_dc's, the Dublin Core
simple schema it imports and the W3C's schema of the ``xml:`` attributes, each as published;
their imports keep their official ``schemaLocation``, which :class:`LocalSchemas` answers with
the file here (lxml never reaches the network).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from lxml import etree

HERE = Path(__file__).parent
# Each schema's official address -> the copy here.
LOCATIONS = {
    "http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd": "OAI-PMH.xsd",
    "http://www.openarchives.org/OAI/2.0/oai_dc.xsd": "oai_dc.xsd",
    "http://dublincore.org/schemas/xmls/simpledc20021212.xsd": "simpledc20021212.xsd",
    "http://www.w3.org/2001/03/xml.xsd": "xml.xsd",
}
# Both namespaces at once: an OAI-PMH answer, and the oai_dc records its <metadata> holds
# (processContents="strict": each record is validated too).
HARVEST = b"""<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:import namespace="http://www.openarchives.org/OAI/2.0/"
             schemaLocation="http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd"/>
  <xs:import namespace="http://www.openarchives.org/OAI/2.0/oai_dc/"
             schemaLocation="http://www.openarchives.org/OAI/2.0/oai_dc.xsd"/>
</xs:schema>"""


class LocalSchemas(etree.Resolver):  # type: ignore[misc]
    def resolve(self, url: str, public_id: str, context: Any) -> Any:
        name = LOCATIONS.get(url) or (Path(url).name if Path(url).parent == HERE else None)
        if name is None:
            raise AssertionError(f"a schema outside tests/schemas was asked for: {url}")
        return self.resolve_filename(str(HERE / name), context)


@lru_cache(maxsize=1)
def oai_pmh_schema() -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(LocalSchemas())
    return etree.XMLSchema(etree.fromstring(HARVEST, parser, base_url=str(HERE) + "/"))


def validated(document: bytes) -> etree._Element:
    """``document`` parsed, once it is valid against OAI-PMH.xsd and oai_dc.xsd."""
    root = etree.fromstring(document, etree.XMLParser(no_network=True))
    schema = oai_pmh_schema()
    if not schema.validate(root):
        raise AssertionError(f"not valid OAI-PMH: {schema.error_log}\n{document.decode()}")
    return root
