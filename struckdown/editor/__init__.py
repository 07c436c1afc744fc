"""Editor support: highlighters generated from the one grammar, and a language server.

- `roles`: the one table of grammar terminals → highlight roles.
- `pygments_lexer`, `textmate`: the highlighters that table drives.
- `features`, `server`: what `sd lsp` answers (diagnostics, completion, hover, symbols).
- `core`: the only module here that reads the parser, the Program and the type
  registry; everything else goes through it.
"""
