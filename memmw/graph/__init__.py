"""Active memory's knowledge graph: facts, relations and aliases derived from the Markdown.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""

from memmw.graph.syntax import (
    AliasRow as AliasRow,
)
from memmw.graph.syntax import (
    EntityRow as EntityRow,
)
from memmw.graph.syntax import (
    FactRow as FactRow,
)
from memmw.graph.syntax import (
    ParsedNote as ParsedNote,
)
from memmw.graph.syntax import (
    RelationRow as RelationRow,
)
from memmw.graph.syntax import (
    TriggerRow as TriggerRow,
)
from memmw.graph.syntax import (
    normalize_key as normalize_key,
)
from memmw.graph.syntax import (
    normalize_name as normalize_name,
)
from memmw.graph.syntax import (
    parse_note as parse_note,
)
