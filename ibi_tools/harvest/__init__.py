"""``ibi archive import URL``: harvest an OAI-PMH 2.0 repository into an Archive (issue 28).

``ListRecords`` in ``oai_dc`` (optionally one ``--set``, records changed ``--from`` a date), page
after page by resumption token; one item per record, through the Archive's deposit API:

* **The item** (``POST /api/items``, an IBI minted by the Archive): the record's Dublin Core as
  the repository gave it (the 15 elements, each value stripped, duplicates dropped, characters
  the Archive refuses shown as U+FFFD); ``language`` from the first ``dc:language`` that is a
  language tag (``en``, ``pt_BR``); ``oai_source`` = the repository's base URL, the record's OAI
  identifier and datestamp; and ``url`` (:func:`landing_page`): a DOI, else a handle URL, else
  an http(s) ``dc:identifier`` or ``dc:relation`` that is not a file, else one that is.
* **``--fetch``**: every http(s) ``dc:identifier`` and ``dc:relation`` is downloaded (up to
  ``--max-file-size``); what is not a web page (``text/html``, XHTML) becomes a file of the item
  (its SHA-256 and size declared, then checked by the Archive); with none, the item points at
  ``url`` as without ``--fetch``. Each URL left out is reported with its reason.
* **Idempotent**: the ``Idempotency-Key`` of a record's deposit is derived from the Archive's
  service IBI, the base URL and the OAI identifier (the minting service keeps keys 7 days), and
  before the first page the Archive's items are read once: a record whose ``oai_source`` is
  there already is never deposited again, whatever the state file says.
* **Resumable**: a state file (JSON, written aside then renamed over) keeps the token of the page
  being read and every OAI identifier done with its IBI; it is written after each record, so an
  interrupted import continues where it stopped. A token the repository no longer takes
  (``badResumptionToken``: they expire) restarts the list from its beginning, once per run.
* **Deleted records** (``status="deleted"``): the item imported before is deleted (a tombstone
  stays); one never imported is skipped, and said so.
* **The repository**: ``noRecordsMatch`` is an empty harvest; 503 and 429 are retried as
  ``Retry-After`` says (at most 5 times, 10 minutes each); an answer that is not OAI-PMH XML, or
  declares a DOCTYPE (defusedxml refuses it whatever the encoding: no entity is ever expanded),
  stops the import with what was received. Its limits (issue 35; docs/archive.md): every request
  vetted, each hop too, within ``--timeout`` in all, 64 MiB an answer; a record over 1 MiB
  skipped with its reason; a list whose token comes again, or whose pages bring nothing new,
  stopped and named.

The modules, one reason to change each: :mod:`.outbound` is every request made (vetted, pinned,
bounded) and the escaping of remote text, :mod:`.oai` reads the repository's answers,
:mod:`.records` makes an item of a record, :mod:`.files` downloads its files (``--fetch``),
:mod:`.state` keeps the state file, :mod:`.importer` runs the import and
:mod:`.command` is ``ibi archive import`` itself.
"""

from ibi_tools.harvest.files import Fetch, Fetched, download, file_name
from ibi_tools.harvest.importer import Archive, Importer, ImportOptions, Summary, retry_after
from ibi_tools.harvest.oai import (
    HarvestError,
    OaiError,
    OaiPage,
    OaiRecord,
    dublin_core,
    parse_page,
)
from ibi_tools.harvest.records import (
    doi_url,
    file_urls,
    idempotency_key,
    is_file_url,
    item_body,
    landing_page,
    language,
)
from ibi_tools.harvest.state import ImportState, default_state_path

__all__ = [
    "Archive",
    "Fetch",
    "Fetched",
    "HarvestError",
    "ImportOptions",
    "ImportState",
    "Importer",
    "OaiError",
    "OaiPage",
    "OaiRecord",
    "Summary",
    "default_state_path",
    "doi_url",
    "download",
    "dublin_core",
    "file_name",
    "file_urls",
    "idempotency_key",
    "is_file_url",
    "item_body",
    "landing_page",
    "language",
    "parse_page",
    "retry_after",
]
