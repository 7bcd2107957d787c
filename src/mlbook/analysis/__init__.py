"""Numbers the book's sections compute and explain: maths that is not drawing.

One module per section (rope, extension, sinks, learned, relative, alibi, systems, ...).
`mlbook.viz` draws what these return; notebooks print them; nothing here plots.
"""
