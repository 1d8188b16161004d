"""A self-contained HTML picture of the graph (inline CSS and JS, no network)."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memmw.graph.model import Graph, tier

#: Entities drawn at most (the most activated first); a picture of thousands is unreadable.
MAX_NODES = 400


def graph_data(graph: Graph, *, workspace: Path | None = None, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """The JSON the page draws: nodes (entities), links (relations, co-occurrences), facts."""
    nodes: dict[str, dict[str, Any]] = {}
    for key, ent in graph.entities.items():
        activation = graph.activation_of(f"e:{key}")
        facts = [
            {
                "key": f.key,
                "value": f.value,
                "citation": f.citation,
                "current": f.current,
                "retracted": f.retracted,
                "validFrom": f.valid_from,
                "tier": tier(graph.activation_of(f.stable_key)),
            }
            for f in graph.facts_of(key)
        ]
        nodes[key] = {
            "id": key,
            "name": ent.name,
            "kind": ent.kind,
            "aliases": list(ent.aliases),
            "citation": ent.citations[0] if ent.citations else (facts[0]["citation"] if facts else ""),
            "activation": round(activation, 3),
            "tier": tier(activation),
            "facts": facts,
        }
    for rel in graph.relations:  # objects that are not entities yet still get a node
        nodes.setdefault(
            rel.object_key,
            {
                "id": rel.object_key,
                "name": rel.object,
                "kind": "",
                "aliases": [],
                "citation": rel.citation,
                "activation": 1.0,
                "tier": "warm",
                "facts": [],
            },
        )
    keep = sorted(nodes.values(), key=lambda n: (-n["activation"], n["name"]))[:max_nodes]
    kept = {n["id"] for n in keep}
    links = [
        {
            "source": r.subject_key,
            "target": r.object_key,
            "label": r.predicate,
            "citation": r.citation,
            "kind": "relation",
            "retracted": r.retracted,
        }
        for r in graph.relations
        if r.subject_key in kept and r.object_key in kept and r.subject_key != r.object_key
    ]
    links.extend(
        {"source": a, "target": b, "label": f"together in {n} chunk(s)", "citation": "", "kind": "co", "retracted": False}
        for (a, b), n in graph.cooccurrences.items()
        if a in kept and b in kept
    )
    base = workspace.resolve().as_uri() + "/" if workspace is not None else ""
    cited = {n["citation"] for n in keep} | {f["citation"] for n in keep for f in n["facts"]}
    cited |= {link["citation"] for link in links}
    hrefs = {c: citation_href(c, base) for c in sorted(cited) if c}
    return {
        "nodes": keep,
        "links": links,
        "base": base,
        "hrefs": hrefs,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def citation_href(citation: str, base: str = "") -> str:
    """The link of a ``path#L<line>`` citation: the path percent-encoded (``#``, ``?``,
    ``%``, spaces...), then ``#L<line>``; ``base`` is the workspace's ``file://`` URI."""
    path, sep, line = citation.rpartition("#L")
    if not sep or not line.isdigit():
        path, line = citation, ""
    return base + quote(path, safe="/") + (f"#L{line}" if line else "")


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>
body{margin:0;font:14px system-ui,sans-serif;background:#fafafa;color:#222;display:flex;height:100vh}
#side{width:320px;padding:12px;border-right:1px solid #ddd;overflow:auto;background:#fff}
#side h1{font-size:16px;margin:0 0 8px}
#q{width:100%;box-sizing:border-box;padding:6px;font-size:14px}
#legend span{display:inline-block;margin-right:10px}
.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px;vertical-align:middle}
#details{margin-top:12px}
#details li{margin:3px 0}
.old{color:#888;text-decoration:line-through}
svg{flex:1;height:100vh}
.node circle{stroke:#fff;stroke-width:1.5px;cursor:pointer}
.node text{font-size:11px;pointer-events:none}
.node.dim{opacity:.15}.node.hit circle{stroke:#000;stroke-width:3px}
line.relation{stroke:#999;stroke-width:1.4px}line.co{stroke:#ccc;stroke-dasharray:3 3}
</style></head><body>
<div id="side"><h1>__TITLE__</h1>
<input id="q" type="search" placeholder="Search entities, aliases, facts">
<p id="legend"><span><i class="dot" style="background:#d7301f"></i>hot &gt; 2</span><span><i class="dot" style="background:#fc8d59"></i>warm 1-2</span><span><i class="dot" style="background:#6baed6"></i>cool &lt; 1</span></p>
<p id="count"></p><div id="details">Click an entity to see its facts and where they come from.</div></div>
<svg id="g" xmlns="http://www.w3.org/2000/svg"></svg>
<script type="application/json" id="data">__DATA__</script>
<script>
(function(){
var D=JSON.parse(document.getElementById('data').textContent);
var COLORS={hot:'#d7301f',warm:'#fc8d59',cool:'#6baed6'};
var svg=document.getElementById('g'),W=svg.clientWidth||900,H=svg.clientHeight||700;
var NS='http://www.w3.org/2000/svg',nodes=D.nodes,byId={};
nodes.forEach(function(n,i){var a=2*Math.PI*i/Math.max(1,nodes.length);n.x=W/2+Math.cos(a)*W/4;n.y=H/2+Math.sin(a)*H/4;n.vx=0;n.vy=0;byId[n.id]=n;});
var links=D.links.filter(function(l){return byId[l.source]&&byId[l.target];});
for(var it=0;it<300;it++){var k=0.02*(1-it/300)+0.002;
 for(var i=0;i<nodes.length;i++){for(var j=i+1;j<nodes.length;j++){var a=nodes[i],b=nodes[j],dx=a.x-b.x,dy=a.y-b.y,d2=dx*dx+dy*dy+0.01,f=Math.min(2,300/d2);a.vx+=dx*f;a.vy+=dy*f;b.vx-=dx*f;b.vy-=dy*f;}}
 links.forEach(function(l){var a=byId[l.source],b=byId[l.target],dx=b.x-a.x,dy=b.y-a.y,d=Math.sqrt(dx*dx+dy*dy)+0.01,f=(d-90)*0.02;a.vx+=dx/d*f;a.vy+=dy/d*f;b.vx-=dx/d*f;b.vy-=dy/d*f;});
 nodes.forEach(function(n){n.vx+=(W/2-n.x)*k;n.vy+=(H/2-n.y)*k;n.x+=Math.max(-20,Math.min(20,n.vx));n.y+=Math.max(-20,Math.min(20,n.vy));n.vx*=0.5;n.vy*=0.5;n.x=Math.max(30,Math.min(W-130,n.x));n.y=Math.max(30,Math.min(H-30,n.y));});}
function el(name,attrs){var e=document.createElementNS(NS,name);for(var a in attrs)e.setAttribute(a,attrs[a]);return e;}
links.forEach(function(l){var a=byId[l.source],b=byId[l.target],ln=el('line',{x1:a.x,y1:a.y,x2:b.x,y2:b.y,'class':l.kind});var t=el('title',{});t.textContent=a.name+' '+l.label+' '+b.name+(l.citation?' ('+l.citation+')':'');ln.appendChild(t);svg.appendChild(ln);});
nodes.forEach(function(n){var g=el('g',{'class':'node',transform:'translate('+n.x+','+n.y+')'});var r=6+Math.min(14,4*Math.sqrt(n.activation));
 g.appendChild(el('circle',{r:r,fill:COLORS[n.tier]||'#999'}));var tx=el('text',{x:r+3,y:4});tx.textContent=n.name;g.appendChild(tx);
 g.addEventListener('click',function(){show(n.id);});n.el=g;svg.appendChild(g);});
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function cite(c){if(!c)return'';return ' <a class="cite" href="'+esc(D.hrefs[c]||'')+'">'+esc(c)+'</a>';}
function show(id){var n=byId[id];if(!n)return;var h='<h2>'+esc(n.name)+'</h2>';
 if(n.aliases.length)h+='<p>Also: '+esc(n.aliases.join(', '))+'</p>';
 h+='<p>Activation '+n.activation+' ('+n.tier+')'+cite(n.citation)+'</p><ul>';
 n.facts.forEach(function(f){h+='<li class="'+(f.current&&!f.retracted?'':'old')+'">'+esc(f.key)+' = '+esc(f.value)+(f.validFrom?' (since '+esc(f.validFrom)+')':'')+cite(f.citation)+'</li>';});
 links.forEach(function(l){if(l.kind==='relation'&&(l.source===id||l.target===id))h+='<li>'+esc(byId[l.source].name)+' '+esc(l.label)+' '+esc(byId[l.target].name)+cite(l.citation)+'</li>';});
 document.getElementById('details').innerHTML=h+'</ul>';}
function search(q){q=q.trim().toLowerCase();var hits=0;nodes.forEach(function(n){var text=(n.name+' '+n.aliases.join(' ')+' '+n.facts.map(function(f){return f.key+' '+f.value;}).join(' ')).toLowerCase();
 var hit=q&&text.indexOf(q)>=0;if(hit)hits++;n.el.setAttribute('class','node'+(q?(hit?' hit':' dim'):''));});
 document.getElementById('count').textContent=q?hits+' of '+nodes.length+' entities match':nodes.length+' entities, '+links.length+' links';return hits;}
document.getElementById('q').addEventListener('input',function(e){search(e.target.value);});
var params=new URLSearchParams(location.hash.slice(1));
if(params.get('q')){document.getElementById('q').value=params.get('q');}
search(params.get('q')||'');if(params.get('select'))show(params.get('select'));
document.body.setAttribute('data-ready','1');
})();
</script></body></html>
"""


def render_graph_html(graph: Graph, *, title: str = "memmw graph", workspace: Path | None = None) -> str:
    """The page as a string (data embedded as JSON with ``<`` escaped: notes cannot end the script)."""
    data = json.dumps(graph_data(graph, workspace=workspace), ensure_ascii=False)
    data = data.replace("<", "\\u003c")
    return _PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", data)


def write_graph_html(
    graph: Graph, path: Path | str, *, title: str = "memmw graph", workspace: Path | None = None
) -> Path:
    """Write the page to ``path`` (what ``memmw graph --html FILE`` does). Returns the path.

    Open it in any browser; it loads nothing from the network. ``#q=text`` in the URL
    searches on load, ``#select=<entity key>`` opens an entity's facts.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_graph_html(graph, title=title, workspace=workspace), encoding="utf-8")
    return out
