package environ

import "strings"

// Series and bases. Juju 3 names a machine's OS by its base ("ubuntu" at
// channel "22.04"); the 2015 API names it by a series ("jammy"). The
// table is Juju's (core/base: its Ubuntu series, CentOS and the
// kubernetes and genericlinux pseudo-series), with the Ubuntu releases
// Juju learns from the host's distro-info after its static table ends
// (24.10 on). Bases of CentOS drop the "centos" prefix of Juju's version
// ("centos7" is centos@7); the pseudo-series are their own channel.
var seriesTable = []struct{ series, os, track string }{
	{"precise", "ubuntu", "12.04"},
	{"quantal", "ubuntu", "12.10"},
	{"raring", "ubuntu", "13.04"},
	{"saucy", "ubuntu", "13.10"},
	{"trusty", "ubuntu", "14.04"},
	{"utopic", "ubuntu", "14.10"},
	{"vivid", "ubuntu", "15.04"},
	{"wily", "ubuntu", "15.10"},
	{"xenial", "ubuntu", "16.04"},
	{"yakkety", "ubuntu", "16.10"},
	{"zesty", "ubuntu", "17.04"},
	{"artful", "ubuntu", "17.10"},
	{"bionic", "ubuntu", "18.04"},
	{"cosmic", "ubuntu", "18.10"},
	{"disco", "ubuntu", "19.04"},
	{"eoan", "ubuntu", "19.10"},
	{"focal", "ubuntu", "20.04"},
	{"groovy", "ubuntu", "20.10"},
	{"hirsute", "ubuntu", "21.04"},
	{"impish", "ubuntu", "21.10"},
	{"jammy", "ubuntu", "22.04"},
	{"kinetic", "ubuntu", "22.10"},
	{"lunar", "ubuntu", "23.04"},
	{"mantic", "ubuntu", "23.10"},
	{"noble", "ubuntu", "24.04"},
	{"oracular", "ubuntu", "24.10"},
	{"plucky", "ubuntu", "25.04"},
	{"questing", "ubuntu", "25.10"},
	{"resolute", "ubuntu", "26.04"},
	{"centos7", "centos", "7"},
	{"centos8", "centos", "8"},
	{"centos9", "centos", "9"},
	{"kubernetes", "kubernetes", "kubernetes"},
	{"genericlinux", "genericlinux", "genericlinux"},
}

// SeriesBase returns the base of a series: its OS and channel track
// ("jammy": "ubuntu", "22.04"). ok is false for a series Juju does not
// know.
func SeriesBase(series string) (os, track string, ok bool) {
	for _, s := range seriesTable {
		if s.series == series {
			return s.os, s.track, true
		}
	}
	return "", "", false
}

// BaseSeries returns the series of a base, given as OS and channel; the
// channel's risk is ignored ("22.04/stable" is "22.04"). ok is false for
// a base no series names.
func BaseSeries(os, channel string) (series string, ok bool) {
	track, _, _ := strings.Cut(channel, "/")
	for _, s := range seriesTable {
		if s.os == os && s.track == track {
			return s.series, true
		}
	}
	return "", false
}

// SeriesOS returns the OS of a series ("jammy": "ubuntu"), "" for a
// series Juju does not know.
func SeriesOS(series string) string {
	os, _, _ := SeriesBase(series)
	return os
}
