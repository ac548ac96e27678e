"""What a search leaves behind: ledger, summary, tables, report, provenance, record versions."""
