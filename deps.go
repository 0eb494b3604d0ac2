//go:build tools

package main

import (
	_ "charm.land/bubbles/v2/progress"
	_ "charm.land/bubbletea/v2"
	_ "charm.land/lipgloss/v2"
	_ "github.com/BurntSushi/toml"
	_ "github.com/charmbracelet/x/exp/teatest/v2"
	_ "github.com/ebitengine/purego"
)
