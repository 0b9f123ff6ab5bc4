package params

// LoginRequest is the argument of Admin.Login (v3). Every field is optional.
type LoginRequest struct {
	AuthTag       string `json:"auth-tag"`
	Credentials   string `json:"credentials"`
	Nonce         string `json:"nonce"`
	Macaroons     []any  `json:"macaroons"`
	BakeryVersion int    `json:"bakery-version,omitempty"`
	CLIArgs       string `json:"cli-args,omitempty"`
	UserData      string `json:"user-data"`
	ClientVersion string `json:"client-version,omitempty"`
	Token         string `json:"token,omitempty"`
}

// HostPort is one API address. Juju embeds Address, so its fields are flat
// on the wire (no "Address" key), whatever the schema says.
type HostPort struct {
	Value       string `json:"value"`
	Type        string `json:"type"`
	Scope       string `json:"scope"`
	SpaceName   string `json:"space-name,omitempty"`
	SpaceID     string `json:"space-id,omitempty"`
	CIDR        string `json:"cidr,omitempty"`
	ConfigType  string `json:"config-type,omitempty"`
	IsSecondary bool   `json:"is-secondary,omitempty"`
	Port        int    `json:"port"`
}

// FacadeVersions names a facade and the versions served.
type FacadeVersions struct {
	Name     string `json:"name"`
	Versions []int  `json:"versions"`
}

// AuthUserInfo describes a logged-in user.
type AuthUserInfo struct {
	DisplayName      string  `json:"display-name"`
	Identity         string  `json:"identity"`
	LastConnection   *string `json:"last-connection,omitempty"`
	Credentials      *string `json:"credentials,omitempty"`
	ControllerAccess string  `json:"controller-access"`
	ModelAccess      string  `json:"model-access"`
}

// LoginResult is the result of Admin.Login. All fields are omitempty.
type LoginResult struct {
	Servers       [][]HostPort     `json:"servers,omitempty"`
	ModelTag      string           `json:"model-tag,omitempty"`
	ControllerTag string           `json:"controller-tag,omitempty"`
	UserInfo      *AuthUserInfo    `json:"user-info,omitempty"`
	Facades       []FacadeVersions `json:"facades,omitempty"`
	ServerVersion string           `json:"server-version,omitempty"`
	PublicDNSName string           `json:"public-dns-name,omitempty"`
}

// RedirectInfoResult is the result of Admin.RedirectInfo.
type RedirectInfoResult struct {
	Servers [][]HostPort `json:"servers"`
	CACert  string       `json:"ca-cert"`
}
