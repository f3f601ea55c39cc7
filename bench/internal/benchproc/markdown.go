package benchproc

import "strings"

// TableRows parses the first Markdown table in md into its rows, keyed by
// their first column, each a map from the header's names to the row's
// cells (trimmed). The reports' tests read their own output with it.
func TableRows(md string) map[string]map[string]string {
	rows := map[string]map[string]string{}
	var header []string
	for line := range strings.SplitSeq(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		cols := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		switch {
		case header == nil:
			header = cols
		case strings.HasPrefix(cols[0], "---"):
		default:
			row := map[string]string{}
			for i, h := range header {
				if i < len(cols) {
					row[h] = cols[i]
				}
			}
			rows[cols[0]] = row
		}
	}
	return rows
}
