package state

import (
	"strconv"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// ControllerInstanceID is the instance id recorded for the controller
// machine made by Initialize.
const ControllerInstanceID = "controller-0"

// InitArgs describes a new controller for Initialize.
type InitArgs struct {
	// UUIDs are generated when empty.
	ControllerUUID      string
	ControllerModelUUID string
	DefaultModelUUID    string

	// AdminPassword is the password of user "admin".
	AdminPassword string
	// AgentPassword and AgentNonce are those of the controller agent,
	// machine 0 of the controller model.
	AgentPassword string
	AgentNonce    string

	ControllerConfig map[string]any
	// Identity, when set, is stored with the controller (several daemons
	// on one store: see Identity); it must hold the passwords above.
	Identity *Identity
	// ModelConfig is the initial config of both the controller model and
	// the default model, over Juju's defaults (as AddModel).
	ModelConfig map[string]any
}

// InitResult reports the UUIDs Initialize used.
type InitResult struct {
	ControllerUUID      string
	ControllerModelUUID string
	DefaultModelUUID    string
}

// Initialized reports whether Initialize has been run on this database.
func (st *State) Initialized() (bool, error) {
	var ok bool
	err := st.view(func(r reader) error {
		var err error
		ok, err = exists(r, KindController, "", ControllerID)
		return err
	})
	return ok, err
}

// Initialize creates, in one transaction, the controller record, the
// "controller" and "default" models (both IAAS), the superuser "admin" and
// the controller agent's machine 0 in the controller model, already
// provisioned with args.AgentNonce. On an initialized database it returns
// an AlreadyExists error.
func (st *State) Initialize(args InitArgs) (InitResult, error) {
	res := InitResult{
		ControllerUUID:      args.ControllerUUID,
		ControllerModelUUID: args.ControllerModelUUID,
		DefaultModelUUID:    args.DefaultModelUUID,
	}
	for _, u := range []*string{&res.ControllerUUID, &res.ControllerModelUUID, &res.DefaultModelUUID} {
		if *u == "" {
			*u = newUUID()
		} else if !IsValidUUID(*u) {
			return InitResult{}, errors.NotValidf("UUID %q", *u)
		}
	}
	if res.ControllerModelUUID == res.DefaultModelUUID {
		return InitResult{}, errors.NotValidf("same UUID for the controller and default models")
	}
	if args.AdminPassword == "" {
		return InitResult{}, errors.NotValidf("empty admin password")
	}
	if err := validateAgentPassword(args.AgentPassword); err != nil {
		return InitResult{}, err
	}
	if args.AgentNonce == "" {
		return InitResult{}, errors.NotValidf("empty agent nonce")
	}
	if id := args.Identity; id != nil && (id.AdminPassword != args.AdminPassword ||
		id.AgentPassword != args.AgentPassword || id.AgentNonce != args.AgentNonce) {
		return InitResult{}, errors.NotValidf("controller identity whose passwords are not the controller's")
	}
	ctrlCfg, err := normalizeConfig(args.ControllerConfig)
	if err != nil {
		return InitResult{}, errors.Annotate(err, "controller config")
	}
	modelCfg, err := newModelConfig(ModelTypeIAAS, args.ModelConfig)
	if err != nil {
		return InitResult{}, errors.Annotate(err, "model config")
	}
	hash, salt := newUserPasswordHash(args.AdminPassword)
	admin := &userDoc{
		Name:         AdminUser,
		DisplayName:  AdminUser,
		Access:       AccessSuperuser,
		PasswordSalt: salt,
		PasswordHash: hash,
		CreatedAt:    st.now().UTC().Round(0),
	}
	agentHash := agentPasswordHash(args.AgentPassword)

	err = st.update(func(tx *txn) error {
		if ok, err := exists(tx, KindController, "", ControllerID); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("controller")
		}
		if err := tx.stampSchema(SchemaVersion); err != nil {
			return err
		}
		if err := tx.putIdentity(args.Identity); err != nil {
			return err
		}
		ctrl := &controllerDoc{UUID: res.ControllerUUID, ModelUUID: res.ControllerModelUUID, Config: ctrlCfg}
		if err := tx.put(KindController, "", ControllerID, ctrl, watcher.FieldCreated); err != nil {
			return err
		}
		for _, m := range []*modelDoc{
			{UUID: res.ControllerModelUUID, Name: ControllerModelName, Type: ModelTypeIAAS, Life: Alive, Config: modelCfg},
			{UUID: res.DefaultModelUUID, Name: DefaultModelName, Type: ModelTypeIAAS, Life: Alive, Config: modelCfg},
		} {
			if err := tx.addModel(m); err != nil {
				return err
			}
		}
		if err := tx.addUser(admin); err != nil {
			return err
		}
		seq, err := tx.nextSequence(res.ControllerModelUUID, string(KindMachine))
		if err != nil {
			return err
		}
		return tx.addMachine(&machineDoc{
			Machine: Machine{
				Model:          res.ControllerModelUUID,
				ID:             strconv.Itoa(seq),
				Life:           Alive,
				Jobs:           []string{JobHostUnits, JobManageModel},
				Nonce:          args.AgentNonce,
				InstanceID:     ControllerInstanceID,
				Base:           Base{Name: "ubuntu", Channel: "22.04"},
				Series:         "jammy",
				Status:         Status{Status: "started", Since: tx.now},
				InstanceStatus: Status{Status: "running", Since: tx.now},
			},
			PasswordHash: agentHash,
		})
	})
	if err != nil {
		return InitResult{}, err
	}
	st.logger.Info("state initialized",
		"controller", res.ControllerUUID, "controller-model", res.ControllerModelUUID,
		"default-model", res.DefaultModelUUID)
	return res, nil
}
