"""The CLI of struckdown 0.x (SPEC §11): 0.18's `sd batch` and `sd chat` spellings
(`batch`, `chat`) and its flags (`options`). The library's 0.x names are in `struckdown/compat/`."""
