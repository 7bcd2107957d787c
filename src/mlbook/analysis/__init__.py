"""Numbers the book's sections compute and explain: maths that is not drawing.

One module per section (absolute, learned, relative, rope, alibi, extension, sinks, systems, production,
interview, ...).
`mlbook.viz` draws what these return; notebooks print them; nothing here plots.
"""
